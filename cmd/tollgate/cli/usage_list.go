package cli

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// runUsageList prints a key's usage records, newest first: one per
// request, whatever ended it (a deleted key's too).
func runUsageList(ctx context.Context, e *env, f *flags, args []string) error {
	key := f.fs.String("key", "", "id of the key whose records to list (a deleted key's too)")
	limit := f.fs.Int("limit", 50, fmt.Sprintf("how many records, newest first (1 to %d)", store.MaxUsageRecords))
	asJSON := f.fs.Bool("json", false, "print the records as a JSON array")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if err := f.require("key"); err != nil {
		return err
	}
	if *limit < 1 || *limit > store.MaxUsageRecords {
		return usagef("usage list: --limit must be between 1 and %d", store.MaxUsageRecords)
	}
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	recs, err := svc.Records(ctx, cliActor, manage.UsageRequest{KeyID: *key, AllTime: true, OrDeleted: true}, nil, *limit)
	if err != nil {
		return notFound(err, "no key with id %q", *key)
	}
	out := make([]manage.RecordJSON, len(recs))
	for i, r := range recs {
		out[i] = manage.RecordView(r)
	}
	if *asJSON {
		return writeJSON(e.stdout, out)
	}
	if len(out) == 0 {
		_, err := fmt.Fprintln(e.stdout, "no records")
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CREATED_AT\tENDPOINT\tMODEL\tPROVIDER\tSTATUS\tPROMPT\tCOMPLETION\tCOST_USD\tEST\tATTEMPTS\tREQUEST_ID")
	for _, r := range out {
		code := strconv.Itoa(r.Status)
		if r.ErrorCode != "" {
			code += " " + r.ErrorCode
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%t\t%d\t%s\n", r.CreatedAt.Format(time.RFC3339), r.Endpoint, r.Model, r.Provider,
			code, r.PromptTokens, r.CompletionTokens, r.CostUSD, r.Estimated, r.Attempts, r.RequestID)
	}
	return tw.Flush()
}

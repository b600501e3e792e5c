package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/manage"
)

// runKeyUsage totals a key's usage over a range, by model and by hour or
// day: the API's GET /api/v1/usage?key_id=. A deleted key's history stays,
// so its usage is shown too; an id with neither a live key nor any usage
// in the range is an error.
func runKeyUsage(ctx context.Context, e *env, f *flags, args []string) error {
	from := f.fs.String("from", "", "start of the range (YYYY-MM-DD or RFC 3339; default: 30 days before --to)")
	to := f.fs.String("to", "", "end of the range (YYYY-MM-DD or RFC 3339; default: now)")
	group := f.fs.String("group", "day", "bucket size: hour or day")
	asJSON := f.fs.Bool("json", false, "print the usage as JSON")
	pos, err := f.parse(args, "ID")
	if err != nil {
		return err
	}
	req := manage.UsageRequest{KeyID: pos[0], Group: *group, OrDeleted: true}
	if req.From, err = manage.ParseInstant("from", *from); err != nil {
		return serviceError(err)
	}
	if req.To, err = manage.ParseInstant("to", *to); err != nil {
		return serviceError(err)
	}
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	rep, err := svc.Usage(ctx, cliActor, req)
	if err != nil {
		return serviceError(err)
	}
	if rep.Summary.TotalRequests == 0 {
		if _, err := keyByID(ctx, svc, req.KeyID); err != nil {
			return err
		}
	}
	if *asJSON {
		return writeJSON(e.stdout, manage.UsageView(rep))
	}
	return writeUsage(e.stdout, req.KeyID, manage.UsageView(rep))
}

func writeUsage(w io.Writer, keyID string, u manage.UsageJSON) error {
	t := u.Totals
	rate := 0.0
	if t.Requests > 0 {
		rate = 100 * float64(t.ErrorRequests) / float64(t.Requests)
	}
	if err := writeFields(w,
		"key", keyID,
		"from", u.From.Format(time.RFC3339),
		"to", u.To.Format(time.RFC3339),
		"requests", strconv.FormatInt(t.Requests, 10),
		"errors", fmt.Sprintf("%d (%.1f%%)", t.ErrorRequests, rate),
		"prompt_tokens", strconv.FormatInt(t.PromptTokens, 10),
		"completion_tokens", strconv.FormatInt(t.CompletionTokens, 10),
		"cost_usd", t.CostUSD.String(),
	); err != nil {
		return err
	}
	if len(u.ByModel) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "MODEL\tREQUESTS\tPROMPT\tCOMPLETION\tCOST_USD\t")
	for _, m := range u.ByModel {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t\n", m.Model, m.Requests, m.PromptTokens, m.CompletionTokens, m.CostUSD)
	}
	if len(u.ByEndpoint) > 0 {
		fmt.Fprintln(tw, "\t\t\t\t\t")
		fmt.Fprintln(tw, "ENDPOINT\tREQUESTS\tPROMPT\tCOMPLETION\tCOST_USD\t")
		for _, e := range u.ByEndpoint {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t\n", e.Endpoint, e.Requests, e.PromptTokens, e.CompletionTokens, e.CostUSD)
		}
	}
	return tw.Flush()
}

package cli

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// usageRecordJSON is one usage record on the wire.
type usageRecordJSON struct {
	ID               string      `json:"id"`
	Time             time.Time   `json:"time"`
	RequestID        string      `json:"request_id"`
	Model            string      `json:"model"`
	Provider         string      `json:"provider"`
	Deployment       string      `json:"deployment"`
	Status           int         `json:"status"`
	ErrorCode        string      `json:"error_code"`
	PromptTokens     int64       `json:"prompt_tokens"`
	CompletionTokens int64       `json:"completion_tokens"`
	CostUSD          money.Nanos `json:"cost_usd"`
	Estimated        bool        `json:"estimated"`
	Attempts         int         `json:"attempts"`
	LatencyMS        int64       `json:"latency_ms"`
	TTFTMS           int64       `json:"ttft_ms"`
}

func usageRecordView(r store.UsageRecord) usageRecordJSON {
	return usageRecordJSON{
		ID: r.ID, Time: r.CreatedAt.UTC(), RequestID: r.RequestID, Model: r.Model, Provider: r.Provider,
		Deployment: r.Deployment, Status: r.Status, ErrorCode: r.ErrorCode,
		PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens, CostUSD: r.Cost,
		Estimated: r.Estimated, Attempts: r.Attempts, LatencyMS: r.Latency.Milliseconds(), TTFTMS: r.TTFT.Milliseconds(),
	}
}

// runUsageList prints a key's usage records, newest first: one per
// request, whatever ended it.
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
	s, err := f.openStore(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	recs, err := s.UsageRecords(ctx, *key, *limit)
	if err != nil {
		return err
	}
	out := make([]usageRecordJSON, len(recs))
	for i, r := range recs {
		out[i] = usageRecordView(r)
	}
	if *asJSON {
		return writeJSON(e.stdout, out)
	}
	if len(out) == 0 {
		_, err := fmt.Fprintln(e.stdout, "no records")
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tMODEL\tPROVIDER\tSTATUS\tPROMPT\tCOMPLETION\tCOST_USD\tEST\tATTEMPTS\tREQUEST_ID")
	for _, r := range out {
		code := strconv.Itoa(r.Status)
		if r.ErrorCode != "" {
			code += " " + r.ErrorCode
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%t\t%d\t%s\n", r.Time.Format(time.RFC3339), r.Model, r.Provider,
			code, r.PromptTokens, r.CompletionTokens, r.CostUSD, r.Estimated, r.Attempts, r.RequestID)
	}
	return tw.Flush()
}

package usagelog

import (
	"context"
	"log/slog"

	"github.com/tollgate/tollgate/refusal"
	"github.com/tollgate/tollgate/store"
)

// AccessLog writes one log line per request — from its usage record, which
// every admitted request has exactly one of — and passes the record on. The
// line names the key and account by id, never a secret.
type AccessLog struct {
	Usage  Sink
	Logger *slog.Logger
}

// Sink receives one usage record per request; it must not lose them (a
// Recorder).
type Sink interface {
	Record(rec store.UsageRecord) error
}

// endpointOf is the record's endpoint, chat when it names none (as the
// store writes it).
func endpointOf(rec store.UsageRecord) string {
	if rec.Endpoint == "" {
		return store.EndpointChat
	}
	return rec.Endpoint
}

// Record logs rec and hands it to the next Sink.
func (a AccessLog) Record(rec store.UsageRecord) error {
	level := slog.LevelInfo
	if rec.Status >= 500 {
		level = slog.LevelWarn
	}
	if !a.Logger.Enabled(context.Background(), level) {
		// The line's attributes (the cost's text among them) are built
		// only for a line that is written.
		return a.Usage.Record(rec)
	}
	a.Logger.LogAttrs(context.Background(), level, "request",
		slog.String("request_id", rec.RequestID),
		slog.String("key_id", rec.KeyID),
		slog.String("account_id", rec.AccountID),
		slog.String("endpoint", endpointOf(rec)),
		slog.String("model", rec.Model),
		slog.String("provider", rec.Provider),
		slog.String("deployment", rec.Deployment),
		slog.Int("status", rec.Status),
		slog.Bool("streamed", rec.Streamed),
		slog.String("error_code", rec.ErrorCode),
		slog.Int("attempts", rec.Attempts),
		slog.Int64("prompt_tokens", rec.PromptTokens),
		slog.Int64("completion_tokens", rec.CompletionTokens),
		slog.String("cost_usd", rec.Cost.String()),
		slog.Bool("estimated", rec.Estimated),
		slog.Int64("duration_ms", rec.Latency.Milliseconds()),
		slog.Int64("ttft_ms", rec.TTFT.Milliseconds()),
	)
	return a.Usage.Record(rec)
}

// RefusalAccessLog writes the access-log line of a request the router step
// refused before admitting it (which has no usage record), and passes the
// refusal on to be counted.
type RefusalAccessLog struct {
	Refusals refusal.Sink
	Logger   *slog.Logger
}

// Count logs r and hands it to the next refusal.Sink.
func (a RefusalAccessLog) Count(r refusal.Refusal) {
	level := slog.LevelInfo
	if r.Status >= 500 {
		level = slog.LevelWarn
	}
	a.Logger.LogAttrs(context.Background(), level, "request",
		slog.String("request_id", r.RequestID),
		slog.String("key_id", r.KeyID),
		slog.String("account_id", r.AccountID),
		slog.String("model", store.Truncate(r.Model, refusal.MaxModel)),
		slog.Int("status", r.Status),
		slog.String("error_code", r.Code),
		slog.Bool("refused", true),
	)
	a.Refusals.Count(r)
}

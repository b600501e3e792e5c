-- The kinds of tokens a record was billed for, beside its prompt and
-- completion counts: prompt tokens read from the provider's prompt cache,
-- prompt tokens written to it (Anthropic), and completion tokens spent
-- reasoning (part of the completion).

ALTER TABLE usage_records ADD COLUMN cached_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN reasoning_tokens BIGINT NOT NULL DEFAULT 0;

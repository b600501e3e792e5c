-- The endpoint each usage record's request called: chat (the records
-- written before, and /v1/chat/completions), responses, messages,
-- embeddings, completions, moderations or rerank (the store refuses any
-- other). The hourly rollups are kept per endpoint too, so that a usage
-- view over whole hours filtered or broken down by endpoint still reads
-- the rollups, one row per key, model, endpoint and hour: a key that
-- calls one endpoint has as many rows as before, and the unfiltered view
-- of the busiest key reads the same rows through the same
-- (key_id, hour) index. SQLite cannot change a primary key: the rollups
-- are copied into a table that has the new one.
--
-- No index on the records' endpoint: the views that read the records (a
-- request log, a CSV export, a range that is not whole hours) walk the
-- key's or the account's (…, created_at) index and check the endpoint on
-- the way, as they do for the model, the status and the error code.
ALTER TABLE usage_records ADD COLUMN endpoint TEXT NOT NULL DEFAULT 'chat';

CREATE TABLE endpoint_rollups (
    key_id             TEXT NOT NULL,
    model              TEXT NOT NULL,
    endpoint           TEXT NOT NULL DEFAULT 'chat',
    hour               TEXT NOT NULL,                 -- the hour's start, UTC
    account_id         TEXT NOT NULL,
    requests           INTEGER NOT NULL,
    error_requests     INTEGER NOT NULL,              -- records with status >= 400
    prompt_tokens      INTEGER NOT NULL,
    completion_tokens  INTEGER NOT NULL,
    cost_nanos         INTEGER NOT NULL,
    cached_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (key_id, model, endpoint, hour)
) STRICT;

INSERT INTO endpoint_rollups (key_id, model, endpoint, hour, account_id, requests, error_requests, prompt_tokens,
    completion_tokens, cost_nanos, cached_tokens, cache_write_tokens, reasoning_tokens)
SELECT key_id, model, 'chat', hour, account_id, requests, error_requests, prompt_tokens,
    completion_tokens, cost_nanos, cached_tokens, cache_write_tokens, reasoning_tokens
FROM usage_rollups;

DROP TABLE usage_rollups;
ALTER TABLE endpoint_rollups RENAME TO usage_rollups;

CREATE INDEX usage_rollups_key_hour ON usage_rollups (key_id, hour);
CREATE INDEX usage_rollups_account_hour ON usage_rollups (account_id, hour);

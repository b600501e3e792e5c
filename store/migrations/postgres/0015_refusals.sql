-- Requests refused for a known key (401 disabled or expired, 403 address or
-- model, 429 rate, 402 balance, 400 invalid…) are counted, not recorded one
-- by one: the servers that refuse add to counters in memory and write them
-- here in batches, one row per key, hour, status, error code and model
-- asked for, adding to the row already there (AddRefusals). message is the
-- last message the client was given for that row.
CREATE TABLE refusal_rollups (
    key_id     TEXT NOT NULL,
    hour       TIMESTAMPTZ NOT NULL,               -- the hour's start, UTC
    status     INTEGER NOT NULL,
    error_code TEXT NOT NULL,
    model      TEXT NOT NULL,                      -- '' when the body was not read
    account_id TEXT NOT NULL,
    refused    BIGINT NOT NULL,
    message    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (key_id, hour, status, error_code, model)
);

CREATE INDEX refusal_rollups_account_hour ON refusal_rollups (account_id, hour);

-- The message a failed request's client was given (NULL on success, and on
-- the records written before this column).
ALTER TABLE usage_records ADD COLUMN error_message TEXT;

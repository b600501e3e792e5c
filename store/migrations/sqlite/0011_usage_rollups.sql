-- Hourly rollups of the usage records, per key and model: written with the
-- records, in the same transaction (RecordUsage), so that a usage view or
-- total over whole hours reads one row per key, model and hour however
-- many records there are. Filled here from the records already stored.
CREATE TABLE usage_rollups (
    key_id            TEXT NOT NULL,
    model             TEXT NOT NULL,
    hour              TEXT NOT NULL,                 -- the hour's start, UTC
    account_id        TEXT NOT NULL,
    requests          INTEGER NOT NULL,
    error_requests    INTEGER NOT NULL,              -- records with status >= 400
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_nanos        INTEGER NOT NULL,
    PRIMARY KEY (key_id, model, hour)
) STRICT;

CREATE INDEX usage_rollups_key_hour ON usage_rollups (key_id, hour);
CREATE INDEX usage_rollups_account_hour ON usage_rollups (account_id, hour);

INSERT INTO usage_rollups (key_id, model, hour, account_id, requests, error_requests, prompt_tokens, completion_tokens, cost_nanos)
SELECT key_id, model, substr(created_at, 1, 13) || ':00:00.000000Z', MIN(account_id),
    COUNT(*), SUM(CASE WHEN status >= 400 THEN 1 ELSE 0 END), SUM(prompt_tokens), SUM(completion_tokens), SUM(cost_nanos)
FROM usage_records
GROUP BY key_id, model, substr(created_at, 1, 13);

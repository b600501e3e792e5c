-- The endpoint each refusal's request called (chat, responses, messages,
-- embeddings, completions, moderations, rerank; '' for a path Tollgate
-- does not serve), so that a usage view filtered by endpoint counts its
-- refusals too. Refusals counted before keep ''. SQLite cannot change a
-- primary key: the rollups are copied into a table with the new one.
CREATE TABLE endpoint_refusal_rollups (
    key_id     TEXT NOT NULL,
    hour       TEXT NOT NULL,                      -- the hour's start, UTC
    status     INTEGER NOT NULL,
    error_code TEXT NOT NULL,
    model      TEXT NOT NULL,                      -- '' when the body was not read
    account_id TEXT NOT NULL,
    refused    INTEGER NOT NULL,
    message    TEXT NOT NULL DEFAULT '',
    endpoint   TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (key_id, hour, status, error_code, model, endpoint)
) STRICT;

INSERT INTO endpoint_refusal_rollups (key_id, hour, status, error_code, model, account_id, refused, message, endpoint)
SELECT key_id, hour, status, error_code, model, account_id, refused, message, '' FROM refusal_rollups;

DROP TABLE refusal_rollups;
ALTER TABLE endpoint_refusal_rollups RENAME TO refusal_rollups;

CREATE INDEX refusal_rollups_account_hour ON refusal_rollups (account_id, hour);

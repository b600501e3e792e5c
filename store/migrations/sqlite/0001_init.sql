-- Accounts, API keys and usage records. STRICT tables reject values of the
-- wrong type. Times are fixed-width UTC text with microseconds
-- (2006-01-02T15:04:05.000000Z), so text order is time order; booleans are
-- 0/1; money is INTEGER nano-dollars.

CREATE TABLE accounts (
    id            TEXT PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE,
    plan          TEXT NOT NULL,
    balance_nanos INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL
) STRICT;

-- A deleted key keeps its row (so usage records still name it) but loses its
-- secret hash at once.
CREATE TABLE keys (
    id              TEXT PRIMARY KEY,
    account_id      TEXT NOT NULL REFERENCES accounts (id),
    secret_hash     BLOB UNIQUE,
    description     TEXT NOT NULL,
    rate_limit_rpm  INTEGER,                   -- NULL: Off
    ip_restrictions TEXT NOT NULL DEFAULT '[]', -- JSON array
    models          TEXT,                      -- JSON array; NULL: All Models
    expires_at      TEXT,                      -- NULL: Never
    enabled         INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    hint            TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    last_used_at    TEXT,
    deleted_at      TEXT,
    CHECK ((deleted_at IS NULL) = (secret_hash IS NOT NULL))
) STRICT;

CREATE INDEX keys_account_created ON keys (account_id, created_at);

-- No cascading deletes: usage is kept for accounting.
CREATE TABLE usage_records (
    id                TEXT PRIMARY KEY,
    key_id            TEXT NOT NULL REFERENCES keys (id),
    account_id        TEXT NOT NULL REFERENCES accounts (id),
    model             TEXT NOT NULL,
    provider          TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_nanos        INTEGER NOT NULL,
    status            INTEGER NOT NULL,
    error_code        TEXT NOT NULL DEFAULT '',
    latency_us        INTEGER NOT NULL,
    created_at        TEXT NOT NULL,
    estimated         INTEGER NOT NULL CHECK (estimated IN (0, 1))
) STRICT;

CREATE INDEX usage_records_key_created ON usage_records (key_id, created_at);

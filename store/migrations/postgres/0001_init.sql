-- Accounts, API keys and usage records. Times are timestamptz (microseconds);
-- money is BIGINT nano-dollars.

CREATE TABLE accounts (
    id            TEXT PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE,
    plan          TEXT NOT NULL,
    balance_nanos BIGINT NOT NULL DEFAULT 0,
    created_at    TIMESTAMPTZ NOT NULL
);

-- A deleted key keeps its row (so usage records still name it) but loses its
-- secret hash at once.
CREATE TABLE keys (
    id              TEXT PRIMARY KEY,
    account_id      TEXT NOT NULL REFERENCES accounts (id),
    secret_hash     BYTEA UNIQUE,
    description     TEXT NOT NULL,
    rate_limit_rpm  INTEGER,                   -- NULL: Off
    ip_restrictions TEXT NOT NULL DEFAULT '[]', -- JSON array
    models          TEXT,                      -- JSON array; NULL: All Models
    expires_at      TIMESTAMPTZ,               -- NULL: Never
    enabled         BOOLEAN NOT NULL,
    hint            TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    last_used_at    TIMESTAMPTZ,
    deleted_at      TIMESTAMPTZ,
    CHECK ((deleted_at IS NULL) = (secret_hash IS NOT NULL))
);

CREATE INDEX keys_account_created ON keys (account_id, created_at);

-- No cascading deletes: usage is kept for accounting.
CREATE TABLE usage_records (
    id                TEXT PRIMARY KEY,
    key_id            TEXT NOT NULL REFERENCES keys (id),
    account_id        TEXT NOT NULL REFERENCES accounts (id),
    model             TEXT COLLATE "C" NOT NULL, -- byte order, as in SQLite
    provider          TEXT NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    cost_nanos        BIGINT NOT NULL,
    status            INTEGER NOT NULL,
    error_code        TEXT NOT NULL DEFAULT '',
    latency_us        BIGINT NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL,
    estimated         BOOLEAN NOT NULL
);

CREATE INDEX usage_records_key_created ON usage_records (key_id, created_at);

-- The management API: tokens that authorise its calls, and the audit log of
-- every management action. A token is stored under the SHA-256 of its
-- secret; the secret itself is never stored. account_id NULL is an admin
-- token (every account); otherwise the token acts for its account only.

CREATE TABLE management_tokens (
    id          TEXT NOT NULL PRIMARY KEY,           -- mt_…
    account_id  TEXT REFERENCES accounts (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    scopes      TEXT NOT NULL,                       -- space-separated
    secret_hash BLOB NOT NULL UNIQUE,
    hint        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    expires_at  TEXT,                                -- NULL: never
    revoked_at  TEXT                                 -- NULL: live
) STRICT;

CREATE INDEX management_tokens_account ON management_tokens (account_id, created_at);

-- One row per management action, by the API, the dashboard or the CLI.
CREATE TABLE audit_log (
    id         TEXT NOT NULL PRIMARY KEY,            -- aud_…
    account_id TEXT,                                 -- the account acted on; NULL: none
    actor      TEXT NOT NULL,                        -- token:mt_…, user:acct_…, cli
    action     TEXT NOT NULL,                        -- key.create, token.revoke…
    target     TEXT NOT NULL,                        -- the object's id
    address    TEXT NOT NULL,                        -- the caller's address, or ""
    at         TEXT NOT NULL
) STRICT;

CREATE INDEX audit_log_account ON audit_log (account_id, at, id);

-- A key's version: every update adds one. The management API's ETag is the
-- version, and an update with If-Match applies only to the version read.
ALTER TABLE keys ADD COLUMN version INTEGER NOT NULL DEFAULT 1;

-- Idempotency-Key: the first answer to a management POST, kept for 24
-- hours so that a retry gets it again instead of acting twice. The answer
-- is sealed (AES-GCM) under a key derived from the caller's token secret,
-- which is never stored: the database alone cannot read a key secret in it.
CREATE TABLE idempotency (
    actor        TEXT NOT NULL,                      -- token:mt_…
    key          TEXT NOT NULL,                      -- the client's Idempotency-Key
    request_hash BLOB NOT NULL,                      -- SHA-256 of the method, path and body
    sealed       BLOB,                               -- NULL while the first call runs
    created_at   TEXT NOT NULL,
    PRIMARY KEY (actor, key)
) STRICT;

CREATE INDEX idempotency_created ON idempotency (created_at);

-- The management API's usage per account, for a time range.
CREATE INDEX usage_records_account_created ON usage_records (account_id, created_at);

-- Key rotation: the secret a rotation replaced keeps working until
-- previous_until (a grace period), then never again.
ALTER TABLE keys ADD COLUMN previous_secret_hash BLOB;
ALTER TABLE keys ADD COLUMN previous_until TEXT;
CREATE INDEX keys_previous_secret ON keys (previous_secret_hash);

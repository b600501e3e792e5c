-- Dashboard sign-in: an account's password hash (NULL: no password set, so
-- no dashboard sign-in) and its signed-in sessions. A session is stored under
-- the SHA-256 of its cookie secret; the secret itself is never stored.

ALTER TABLE accounts
    ADD COLUMN password_hash TEXT; -- encoded hash with its parameters

CREATE TABLE sessions (
    secret_hash BLOB NOT NULL PRIMARY KEY, -- SHA-256 of the cookie secret
    account_id  TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL
) STRICT;

-- For DeleteExpiredSessions.
CREATE INDEX sessions_expires ON sessions (expires_at);
-- For SetPassword, which signs the account out everywhere.
CREATE INDEX sessions_account ON sessions (account_id);

-- Balance reservations: money set aside for requests in flight, so that
-- concurrent requests cannot overdraw an account. The available balance is
-- balance_nanos - reserved_nanos; reserved_nanos is the sum of the account's
-- rows in reservations, kept in step by the same transactions.

ALTER TABLE accounts
    ADD COLUMN reserved_nanos BIGINT NOT NULL DEFAULT 0 CHECK (reserved_nanos >= 0);

CREATE TABLE reservations (
    id           TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL REFERENCES accounts (id),
    amount_nanos BIGINT NOT NULL CHECK (amount_nanos > 0),
    expires_at   TIMESTAMPTZ NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL
);

-- For ReleaseExpired.
CREATE INDEX reservations_expires ON reservations (expires_at);

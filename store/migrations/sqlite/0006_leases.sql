-- Leases: a replica's reservation of a slice of an account's balance, from
-- which it serves requests' holds in memory. A lease starts empty and is
-- shrunk by the records it paid for, so a reservation may now hold 0.
-- SQLite cannot change a CHECK constraint: the table is rebuilt.
CREATE TABLE reservations_next (
    id           TEXT PRIMARY KEY,
    account_id   TEXT NOT NULL REFERENCES accounts (id),
    amount_nanos INTEGER NOT NULL CHECK (amount_nanos >= 0),
    expires_at   TEXT NOT NULL,
    created_at   TEXT NOT NULL
) STRICT;
INSERT INTO reservations_next (id, account_id, amount_nanos, expires_at, created_at)
    SELECT id, account_id, amount_nanos, expires_at, created_at FROM reservations;
DROP TABLE reservations;
ALTER TABLE reservations_next RENAME TO reservations;
CREATE INDEX reservations_expires ON reservations (expires_at);

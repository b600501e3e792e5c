-- Spend budgets: an amount in USD nanos per calendar window (day, week,
-- month, in the account's time zone) or for the key's or account's whole
-- life (total). key_id is '' for an account's own budget. One budget per
-- period and owner.
ALTER TABLE accounts ADD COLUMN timezone TEXT NOT NULL DEFAULT 'UTC';

CREATE TABLE budgets (
    id           TEXT NOT NULL PRIMARY KEY,         -- bgt_…
    account_id   TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    key_id       TEXT NOT NULL DEFAULT '',          -- '' for the account's budget
    period       TEXT NOT NULL CHECK (period IN ('day', 'week', 'month', 'total')),
    amount_nanos INTEGER NOT NULL CHECK (amount_nanos >= 0),
    thresholds   TEXT NOT NULL DEFAULT '50,80,100', -- alert thresholds, percent
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    UNIQUE (account_id, key_id, period)
) STRICT;

-- A budget's windows, each a pot like an account's balance: what fits under
-- the budget in the window is amount - spent - reserved. window_start is
-- Unix seconds (0 for a total budget); window_end too (0: never).
CREATE TABLE budget_windows (
    budget_id      TEXT NOT NULL,
    window_start   INTEGER NOT NULL,
    window_end     INTEGER NOT NULL,
    spent_nanos    INTEGER NOT NULL DEFAULT 0,
    reserved_nanos INTEGER NOT NULL DEFAULT 0 CHECK (reserved_nanos >= 0),
    PRIMARY KEY (budget_id, window_start)
) STRICT;

-- Budget leases: a replica's reservation of part of a window, served from
-- its memory (as reservations are for balances).
CREATE TABLE budget_leases (
    id           TEXT NOT NULL PRIMARY KEY,         -- blse_…
    budget_id    TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    amount_nanos INTEGER NOT NULL CHECK (amount_nanos >= 0),
    expires_at   TEXT NOT NULL,
    created_at   TEXT NOT NULL
) STRICT;

CREATE INDEX budget_leases_expires ON budget_leases (expires_at);

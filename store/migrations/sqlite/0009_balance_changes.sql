-- Balance history: every change made to a balance other than by usage (an
-- account's opening balance, each credit), with the balance it left. Usage
-- debits are the usage records themselves; the management API's balance
-- history joins the two.
CREATE TABLE balance_changes (
    id            TEXT NOT NULL PRIMARY KEY,         -- bal_…
    account_id    TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    kind          TEXT NOT NULL,                     -- opening, credit
    amount_nanos  INTEGER NOT NULL,                  -- may be negative (a correction)
    balance_nanos INTEGER NOT NULL,                  -- the balance right after
    at            TEXT NOT NULL
) STRICT;

CREATE INDEX balance_changes_account ON balance_changes (account_id, at, id);

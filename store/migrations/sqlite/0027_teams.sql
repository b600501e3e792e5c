-- Teams: groups of an account's keys for spend. A team has its own spend
-- budgets (budgets.team_id) and its own model allow-list, which its keys
-- cannot exceed (models: a JSON array, NULL for every model). A key is in
-- one team at most (keys.team_id, NULL for none). A team's name is unique
-- in its account.
CREATE TABLE teams (
    id         TEXT NOT NULL PRIMARY KEY,       -- team_…
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    models     TEXT,                            -- JSON array; NULL: every model
    created_at TEXT NOT NULL,
    UNIQUE (account_id, name)
) STRICT;

ALTER TABLE keys ADD COLUMN team_id TEXT;

CREATE INDEX keys_team ON keys (team_id) WHERE team_id IS NOT NULL;

-- A budget's owner is the account (key_id and team_id ''), a key (key_id
-- set) or a team (team_id set); one budget per period and owner. SQLite
-- cannot change a table's UNIQUE constraint: the budgets are copied into a
-- table that has the new one.
CREATE TABLE team_budgets (
    id           TEXT NOT NULL PRIMARY KEY,         -- bgt_…
    account_id   TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    key_id       TEXT NOT NULL DEFAULT '',          -- '' but for a key's budget
    team_id      TEXT NOT NULL DEFAULT '',          -- '' but for a team's budget
    period       TEXT NOT NULL CHECK (period IN ('day', 'week', 'month', 'total')),
    amount_nanos INTEGER NOT NULL CHECK (amount_nanos >= 0),
    thresholds   TEXT NOT NULL DEFAULT '50,80,100', -- alert thresholds, percent
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    UNIQUE (account_id, key_id, team_id, period)
) STRICT;

INSERT INTO team_budgets (id, account_id, key_id, team_id, period, amount_nanos, thresholds, created_at, updated_at)
SELECT id, account_id, key_id, '', period, amount_nanos, thresholds, created_at, updated_at FROM budgets;

DROP TABLE budgets;
ALTER TABLE team_budgets RENAME TO budgets;

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
    created_at TIMESTAMPTZ NOT NULL,
    UNIQUE (account_id, name)
);

ALTER TABLE keys ADD COLUMN team_id TEXT;

CREATE INDEX keys_team ON keys (team_id) WHERE team_id IS NOT NULL;

-- A budget's owner is the account (key_id and team_id ''), a key (key_id
-- set) or a team (team_id set); one budget per period and owner.
ALTER TABLE budgets ADD COLUMN team_id TEXT NOT NULL DEFAULT '';
ALTER TABLE budgets DROP CONSTRAINT budgets_account_id_key_id_period_key;
ALTER TABLE budgets ADD CONSTRAINT budgets_owner_period UNIQUE (account_id, key_id, team_id, period);

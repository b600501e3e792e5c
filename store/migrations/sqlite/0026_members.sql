-- People: an account's members, each with a role, and the invitations that
-- make them. A member signs in to the dashboard with a password (its
-- encoded hash; NULL: none) or by single sign-on (sso_issuer and
-- sso_subject; NULL: none). email_key is the email in lower case, unique
-- per account. An invitation is stored under the SHA-256 of its link's
-- secret; the secret itself is never stored.
CREATE TABLE members (
    id            TEXT NOT NULL PRIMARY KEY,          -- mem_…
    account_id    TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    email         TEXT NOT NULL,
    email_key     TEXT NOT NULL,
    name          TEXT NOT NULL DEFAULT '',
    role          TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'viewer', 'billing')),
    status        TEXT NOT NULL CHECK (status IN ('active', 'suspended')),
    password_hash TEXT,
    sso_issuer    TEXT,
    sso_subject   TEXT,
    created_at    TEXT NOT NULL,
    created_by    TEXT,                               -- the inviting member; NULL: none
    UNIQUE (account_id, email_key),
    UNIQUE (sso_issuer, sso_subject),
    CHECK ((sso_issuer IS NULL) = (sso_subject IS NULL))
) STRICT;

CREATE INDEX members_email ON members (email_key);

CREATE TABLE invitations (
    id          TEXT NOT NULL PRIMARY KEY,            -- inv_…
    account_id  TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    email       TEXT NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'viewer', 'billing')),
    secret_hash BLOB NOT NULL UNIQUE,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    accepted_at TEXT,                                   -- NULL: not yet
    created_by  TEXT
) STRICT;

CREATE INDEX invitations_account ON invitations (account_id, created_at);

-- Every account has had one person: its owner, with the account's email
-- and password.
INSERT INTO members (id, account_id, email, email_key, name, role, status, password_hash, created_at)
SELECT 'mem_' || substr(id, 6), id, email, lower(email), '', 'owner', 'active', password_hash, created_at FROM accounts;

-- Who made a key or a management token (a member; NULL: made before
-- members, or by the CLI or an admin token).
ALTER TABLE keys ADD COLUMN created_by TEXT;
ALTER TABLE management_tokens ADD COLUMN created_by TEXT;
CREATE INDEX management_tokens_created_by ON management_tokens (created_by);

-- The member a session signed in; the sessions of before are the owner's.
ALTER TABLE sessions ADD COLUMN member_id TEXT REFERENCES members (id) ON DELETE CASCADE;
UPDATE sessions SET member_id = 'mem_' || substr(account_id, 6);
CREATE INDEX sessions_member ON sessions (member_id);

-- Who acted, for the audit log: the member (NULL: the CLI, an admin token,
-- entries of before), its single sign-on subject when it signed in so, and
-- the door (dashboard, api, cli).
ALTER TABLE audit_log ADD COLUMN member_id TEXT;
ALTER TABLE audit_log ADD COLUMN sso_subject TEXT;
ALTER TABLE audit_log ADD COLUMN door TEXT;
CREATE INDEX audit_log_member ON audit_log (account_id, member_id, at);

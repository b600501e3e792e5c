-- Single sign-on. An account whose owners require it lets its members
-- sign in to the dashboard by single sign-on only (their passwords are
-- refused). A session remembers the single sign-on subject it was signed
-- in with (NULL: a password), so that the audit entries of what it does
-- name it.
ALTER TABLE accounts ADD COLUMN sso_required BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE sessions ADD COLUMN sso_subject TEXT;

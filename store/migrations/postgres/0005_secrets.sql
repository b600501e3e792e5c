-- Secrets every replica must share, generated once by whichever replica
-- starts first: the key ext_proc's router step signs the request metadata
-- with, so that its upstream step (on any replica) accepts only attempts
-- the router step admitted.

CREATE TABLE shared_secrets (
    name  TEXT NOT NULL PRIMARY KEY,
    value BYTEA NOT NULL
);

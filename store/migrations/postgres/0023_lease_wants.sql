-- When (Unix milliseconds) a lease of the account's balance, or of the
-- budget window, was last refused money that other leases hold: for a few
-- seconds after, leases there grow by their need only, and replicas give
-- back the free part of their leases there at their next sweep. 0: never.
ALTER TABLE accounts ADD COLUMN wanted_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE budget_windows ADD COLUMN wanted_at BIGINT NOT NULL DEFAULT 0;

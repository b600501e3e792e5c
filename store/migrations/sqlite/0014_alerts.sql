-- Alerts: webhook endpoints per account, an outbox of alert events and one
-- delivery per event and endpoint. An event's dedupe_key is unique, so the
-- same crossing seen by two replicas is one event (INSERT … ON CONFLICT DO
-- NOTHING). The endpoint's signing secret is sealed (AES-GCM) under the
-- server's webhook key: recoverable to sign, never stored in plain.
CREATE TABLE webhook_endpoints (
    id            TEXT NOT NULL PRIMARY KEY,         -- whk_…
    account_id    TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    url           TEXT NOT NULL,
    description   TEXT NOT NULL,
    enabled       INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    secret_sealed BLOB NOT NULL,
    created_at    TEXT NOT NULL
) STRICT;

CREATE INDEX webhook_endpoints_account ON webhook_endpoints (account_id, created_at);

CREATE TABLE alert_events (
    id         TEXT NOT NULL PRIMARY KEY,            -- evt_…
    account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    kind       TEXT NOT NULL,                        -- budget.threshold, balance.low, ping
    dedupe_key TEXT NOT NULL UNIQUE,
    payload    TEXT NOT NULL,                        -- the event's data, JSON
    created_at TEXT NOT NULL
) STRICT;

CREATE TABLE alert_deliveries (
    event_id         TEXT NOT NULL REFERENCES alert_events (id) ON DELETE CASCADE,
    endpoint_id      TEXT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    status           TEXT NOT NULL,                  -- pending, delivered, failed
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TEXT NOT NULL,           -- also the claim's lease while one is sending
    last_status_code INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT NOT NULL DEFAULT '',
    delivered_at     TEXT,
    created_at       TEXT NOT NULL,
    PRIMARY KEY (event_id, endpoint_id)
) STRICT;

CREATE INDEX alert_deliveries_due ON alert_deliveries (status, next_attempt_at);
CREATE INDEX alert_deliveries_endpoint ON alert_deliveries (endpoint_id, created_at);

-- The balance below which the account gets a balance.low alert (NULL: none),
-- and how many times its balance has fallen below it (the alert's dedupe key).
ALTER TABLE accounts ADD COLUMN low_balance_threshold INTEGER;
ALTER TABLE accounts ADD COLUMN low_balance_crossings INTEGER NOT NULL DEFAULT 0;

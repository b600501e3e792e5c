-- Fair alert delivery. Each account with webhook endpoints has one lane:
-- at most one of its deliveries is sent at a time (busy_until is that
-- claim's end, NULL when none is out), and the lane served longest ago
-- (served_at, NULL for never) is claimed first, so that one account's
-- deliveries never hold another's back by more than one send.
CREATE TABLE alert_lanes (
    account_id TEXT NOT NULL PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
    busy_until TEXT,
    served_at  TEXT
) STRICT;

INSERT INTO alert_lanes (account_id) SELECT DISTINCT account_id FROM webhook_endpoints;

-- A delivery of a test ping is marked, so that an endpoint holds at most one
-- pending ping (the unique index; the older ones already queued are
-- marked failed here), and an account's alerts are sent before its pings.
ALTER TABLE alert_deliveries ADD COLUMN ping INTEGER NOT NULL DEFAULT 0 CHECK (ping IN (0, 1));

UPDATE alert_deliveries SET ping = 1
WHERE event_id IN (SELECT id FROM alert_events WHERE kind = 'ping');

UPDATE alert_deliveries SET status = 'failed', last_error = 'not sent: one test ping at a time'
WHERE ping AND status = 'pending' AND EXISTS (SELECT 1 FROM alert_deliveries o
    WHERE o.endpoint_id = alert_deliveries.endpoint_id AND o.ping AND o.status = 'pending'
    AND o.event_id < alert_deliveries.event_id);

CREATE UNIQUE INDEX alert_deliveries_one_ping ON alert_deliveries (endpoint_id) WHERE ping AND status = 'pending';
CREATE INDEX alert_deliveries_endpoint_due ON alert_deliveries (endpoint_id, next_attempt_at) WHERE status = 'pending';

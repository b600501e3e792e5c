-- More about each request on its usage record: the request id the client
-- and the access log see (x-request-id; not unique, since a client may send
-- its own), the deployment that answered, how many upstream attempts were
-- made, and the time to the first byte of the answer (0 when none came).

ALTER TABLE usage_records ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
ALTER TABLE usage_records ADD COLUMN deployment TEXT NOT NULL DEFAULT '';
ALTER TABLE usage_records ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN ttft_us INTEGER NOT NULL DEFAULT 0;

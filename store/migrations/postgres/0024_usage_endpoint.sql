-- The endpoint each usage record's request called: chat (the records
-- written before, and /v1/chat/completions), responses, messages,
-- embeddings, completions, moderations or rerank (the store refuses any
-- other). The hourly rollups are kept per endpoint too, so that a usage
-- view over whole hours filtered or broken down by endpoint still reads
-- the rollups, one row per key, model, endpoint and hour: a key that
-- calls one endpoint has as many rows as before, and the unfiltered view
-- of the busiest key reads the same rows through the same
-- (key_id, hour) index.
--
-- No index on the records' endpoint: the views that read the records (a
-- request log, a CSV export, a range that is not whole hours) walk the
-- key's or the account's (…, created_at) index and check the endpoint on
-- the way, as they do for the model, the status and the error code.
ALTER TABLE usage_records ADD COLUMN endpoint TEXT NOT NULL DEFAULT 'chat';

ALTER TABLE usage_rollups ADD COLUMN endpoint TEXT NOT NULL DEFAULT 'chat';
ALTER TABLE usage_rollups DROP CONSTRAINT usage_rollups_pkey,
    ADD PRIMARY KEY (key_id, model, endpoint, hour);

-- The hourly rollups keep the prompt tokens read from and written to a
-- provider's cache and the completion tokens spent reasoning, as the
-- records do, so that usage totals show them; filled here from the records
-- already stored.
ALTER TABLE usage_rollups ADD COLUMN cached_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_rollups ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_rollups ADD COLUMN reasoning_tokens BIGINT NOT NULL DEFAULT 0;

UPDATE usage_rollups SET cached_tokens = r.cached, cache_write_tokens = r.written, reasoning_tokens = r.reasoning
FROM (
    SELECT key_id, model, date_trunc('hour', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS hour,
        SUM(cached_tokens) AS cached, SUM(cache_write_tokens) AS written, SUM(reasoning_tokens) AS reasoning
    FROM usage_records
    GROUP BY key_id, model, date_trunc('hour', created_at AT TIME ZONE 'UTC')
) r
WHERE usage_rollups.key_id = r.key_id AND usage_rollups.model = r.model AND usage_rollups.hour = r.hour;

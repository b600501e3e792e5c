-- The hourly rollups keep the prompt tokens read from and written to a
-- provider's cache and the completion tokens spent reasoning, as the
-- records do, so that usage totals show them; filled here from the records
-- already stored.
ALTER TABLE usage_rollups ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_rollups ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_rollups ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;

UPDATE usage_rollups SET
    cached_tokens = COALESCE((SELECT SUM(u.cached_tokens) FROM usage_records u
        WHERE u.key_id = usage_rollups.key_id AND u.model = usage_rollups.model
        AND substr(u.created_at, 1, 13) || ':00:00.000000Z' = usage_rollups.hour), 0),
    cache_write_tokens = COALESCE((SELECT SUM(u.cache_write_tokens) FROM usage_records u
        WHERE u.key_id = usage_rollups.key_id AND u.model = usage_rollups.model
        AND substr(u.created_at, 1, 13) || ':00:00.000000Z' = usage_rollups.hour), 0),
    reasoning_tokens = COALESCE((SELECT SUM(u.reasoning_tokens) FROM usage_records u
        WHERE u.key_id = usage_rollups.key_id AND u.model = usage_rollups.model
        AND substr(u.created_at, 1, 13) || ':00:00.000000Z' = usage_rollups.hour), 0);

-- The endpoint each refusal's request called (chat, responses, messages,
-- embeddings, completions, moderations, rerank; '' for a path Tollgate
-- does not serve), so that a usage view filtered by endpoint counts its
-- refusals too. Refusals counted before were chat's or the Messages
-- API's, unknown now: they keep ''.
ALTER TABLE refusal_rollups ADD COLUMN endpoint TEXT NOT NULL DEFAULT '';
ALTER TABLE refusal_rollups DROP CONSTRAINT refusal_rollups_pkey,
    ADD PRIMARY KEY (key_id, hour, status, error_code, model, endpoint);

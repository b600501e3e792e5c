-- Stored responses of the Responses API (store: true, the default): the
-- response object, fetched by GET /v1/responses/{id}, and the conversation
-- it ends (chat messages, its answer included), which a request naming it
-- as previous_response_id continues. Kept for the configured retention,
-- then swept; only the account that made one may read or delete it.
CREATE TABLE responses (
    id           TEXT NOT NULL PRIMARY KEY,          -- resp_…
    account_id   TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    body         BYTEA NOT NULL,                     -- the response object (JSON)
    conversation BYTEA NOT NULL,                     -- JSON array of chat messages
    created_at   TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL
);

CREATE INDEX responses_expires ON responses (expires_at);

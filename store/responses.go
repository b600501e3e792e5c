package store

import (
	"context"
	"fmt"
	"time"
)

// StoredResponse is a response of the Responses API kept for
// previous_response_id and GET /v1/responses/{id}.
type StoredResponse struct {
	ID        string
	AccountID string
	// Body is the response object (JSON).
	Body []byte
	// Conversation is the chat messages it ends, its answer included (a
	// JSON array).
	Conversation []byte
	CreatedAt    time.Time
	ExpiresAt    time.Time
}

func (s *sqlStore) SaveResponse(ctx context.Context, r StoredResponse) error {
	_, err := s.db.write().exec(ctx,
		`INSERT INTO responses (id, account_id, body, conversation, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		r.ID, r.AccountID, r.Body, r.Conversation, dbTime(r.CreatedAt), dbTime(r.ExpiresAt))
	if err != nil {
		return fmt.Errorf("store: save response: %w", err)
	}
	return nil
}

func (s *sqlStore) ResponseByID(ctx context.Context, accountID, id string, now time.Time) (StoredResponse, error) {
	r := StoredResponse{ID: id, AccountID: accountID}
	err := s.db.read().queryRow(ctx,
		`SELECT body, conversation, created_at, expires_at FROM responses WHERE id = $1 AND account_id = $2 AND expires_at > $3`,
		id, accountID, dbTime(now)).Scan(&r.Body, &r.Conversation, &r.CreatedAt, &r.ExpiresAt)
	if err != nil {
		return StoredResponse{}, fmt.Errorf("store: response by id: %w", err)
	}
	return r, nil
}

func (s *sqlStore) DeleteResponse(ctx context.Context, accountID, id string) error {
	n, err := s.db.write().exec(ctx, `DELETE FROM responses WHERE id = $1 AND account_id = $2`, id, accountID)
	if err != nil {
		return fmt.Errorf("store: delete response: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("store: delete response: %w", ErrNotFound)
	}
	return nil
}

func (s *sqlStore) DeleteExpiredResponses(ctx context.Context, now time.Time) (int64, error) {
	n, err := s.db.write().exec(ctx, `DELETE FROM responses WHERE expires_at <= $1`, dbTime(now))
	if err != nil {
		return 0, fmt.Errorf("store: delete expired responses: %w", err)
	}
	return n, nil
}

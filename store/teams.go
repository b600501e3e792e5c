package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Teams. A team groups some of an account's keys for spend: it has its own
// budgets (SetTeamBudgets), held under by every request of its keys beside
// the key's and the account's (BudgetsFor), and its own model allow-list,
// which admission checks beside the key's (Key.TeamModels). A key is in
// one team at most.

const teamIDPrefix = "team_"

// ErrTeamNotEmpty is DeleteTeam's answer while live keys are in the team.
var ErrTeamNotEmpty = errors.New("team has keys")

// Team is a group of an account's keys.
type Team struct {
	ID        string
	AccountID string
	// Name is unique in the account.
	Name string
	// Models is nil for every model, otherwise the allow-list that the
	// team's keys cannot exceed.
	Models    []string
	CreatedAt time.Time
}

const teamColumns = `id, account_id, name, models, created_at`

func scanTeam(row scanner) (Team, error) {
	var t Team
	var models *string
	if err := row.Scan(&t.ID, &t.AccountID, &t.Name, &models, &t.CreatedAt); err != nil {
		return Team{}, err
	}
	var err error
	t.Models, err = modelsOf(models)
	if err != nil {
		return Team{}, fmt.Errorf("team %s: %w", t.ID, err)
	}
	return t, nil
}

// modelsOf reads an allow-list column: NULL is every model (nil).
func modelsOf(col *string) ([]string, error) {
	if col == nil {
		return nil, nil
	}
	var out []string
	if err := json.Unmarshal([]byte(*col), &out); err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// modelsArg is an allow-list as a column's value (NULL for nil).
func modelsArg(models []string) (any, error) {
	if models == nil {
		return nil, nil
	}
	b, err := json.Marshal(models)
	if err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	return string(b), nil
}

// CreateTeam stores a new team; ID and CreatedAt are assigned.
func (s *sqlStore) CreateTeam(ctx context.Context, t Team) (Team, error) {
	id, err := newID(s.random, teamIDPrefix)
	if err != nil {
		return Team{}, fmt.Errorf("store: create team: %w", err)
	}
	models, err := modelsArg(t.Models)
	if err != nil {
		return Team{}, fmt.Errorf("store: create team: %w", err)
	}
	var out Team
	err = s.db.inTx(ctx, func(q querier) error {
		var err error
		out, err = scanTeam(q.queryRow(ctx,
			`INSERT INTO teams (id, account_id, name, models, created_at) VALUES ($1, $2, $3, $4, $5)
			RETURNING `+teamColumns,
			id, t.AccountID, t.Name, models, dbTime(s.now())))
		return err
	})
	if err != nil {
		return Team{}, fmt.Errorf("store: create team: %w", err)
	}
	return out, nil
}

// TeamByID finds a team.
func (s *sqlStore) TeamByID(ctx context.Context, id string) (Team, error) {
	t, err := scanTeam(s.db.read().queryRow(ctx, `SELECT `+teamColumns+` FROM teams WHERE id = $1`, id))
	if err != nil {
		return Team{}, fmt.Errorf("store: team by id: %w", err)
	}
	return t, nil
}

// ListTeams are the account's teams, by name.
func (s *sqlStore) ListTeams(ctx context.Context, accountID string) ([]Team, error) {
	out := []Team{}
	err := s.db.read().queryEach(ctx, `SELECT `+teamColumns+` FROM teams WHERE account_id = $1 ORDER BY name, id`,
		[]any{accountID}, func(row scanner) error {
			t, err := scanTeam(row)
			out = append(out, t)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("store: list teams: %w", err)
	}
	return out, nil
}

// UpdateTeam replaces the team's name and models. The change is announced
// for the account: every replica drops what it cached of the account's
// keys (their team's models) and of their budgets.
func (s *sqlStore) UpdateTeam(ctx context.Context, t Team) (Team, error) {
	models, err := modelsArg(t.Models)
	if err != nil {
		return Team{}, fmt.Errorf("store: update team: %w", err)
	}
	var out Team
	err = s.changeTx(ctx, Change{Kind: ChangeAccount, ID: t.AccountID}, func(q querier) error {
		var err error
		out, err = scanTeam(q.queryRow(ctx,
			`UPDATE teams SET name = $3, models = $4 WHERE id = $1 AND account_id = $2 RETURNING `+teamColumns,
			t.ID, t.AccountID, t.Name, models))
		return err
	})
	if err != nil {
		return Team{}, fmt.Errorf("store: update team: %w", err)
	}
	return out, nil
}

// DeleteTeam removes a team and its budgets; ErrTeamNotEmpty while a live
// key is in it (deleted keys leave it). Announced for the account.
func (s *sqlStore) DeleteTeam(ctx context.Context, accountID, id string) error {
	err := s.changeTx(ctx, Change{Kind: ChangeAccount, ID: accountID}, func(q querier) error {
		// Locks the team's row: a key moved in at the same time waits.
		var name string
		if err := q.queryRow(ctx, `UPDATE teams SET name = name WHERE id = $1 AND account_id = $2 RETURNING name`,
			id, accountID).Scan(&name); err != nil {
			return err
		}
		var n int64
		if err := q.queryRow(ctx, `SELECT COUNT(*) FROM keys WHERE team_id = $1 AND deleted_at IS NULL`, id).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return ErrTeamNotEmpty
		}
		for _, stmt := range []string{
			`UPDATE keys SET team_id = NULL WHERE team_id = $1`,
			`DELETE FROM budgets WHERE team_id = $1`,
			`DELETE FROM team_members WHERE team_id = $1`,
			`DELETE FROM teams WHERE id = $1`,
		} {
			if _, err := q.exec(ctx, stmt, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: delete team: %w", err)
	}
	return nil
}

// SetKeyTeam moves a live key into a team of its account (teamID set) or
// out of its team (teamID ""); ErrNotFound for a key or team that is not
// there, or a team of another account. The key's version grows, and the
// change is announced for the key.
func (s *sqlStore) SetKeyTeam(ctx context.Context, keyID, teamID string) (Key, error) {
	var out Key
	err := s.changeTx(ctx, Change{Kind: ChangeKey, ID: keyID}, func(q querier) error {
		if teamID != "" {
			// Locks the team's row against a delete at the same time.
			var n string
			err := q.queryRow(ctx,
				`UPDATE teams SET name = name WHERE id = $1 AND account_id = (SELECT account_id FROM keys WHERE id = $2) RETURNING id`,
				teamID, keyID).Scan(&n)
			if err != nil {
				return err
			}
		}
		var err error
		out, err = scanKey(q.queryRow(ctx,
			`UPDATE keys SET team_id = $2, version = version + 1 WHERE id = $1 AND deleted_at IS NULL RETURNING `+keyColumns,
			keyID, nullable(teamID)))
		return err
	})
	if err != nil {
		return Key{}, fmt.Errorf("store: set key team: %w", err)
	}
	return out, nil
}

// KeyTeams are the teams of the account's keys that are in one, deleted
// keys included (a deleted key keeps the team it was in until the team
// is deleted), by key id: usage by team joins on it.
func (s *sqlStore) KeyTeams(ctx context.Context, accountID string) (map[string]string, error) {
	out := map[string]string{}
	err := s.db.read().queryEach(ctx, `SELECT id, team_id FROM keys WHERE account_id = $1 AND team_id IS NOT NULL`,
		[]any{accountID}, func(row scanner) error {
			var k, t string
			if err := row.Scan(&k, &t); err != nil {
				return err
			}
			out[k] = t
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("store: key teams: %w", err)
	}
	return out, nil
}

// KeyMakers are the members who made the account's keys that one made,
// deleted keys included (their usage stays).
func (s *sqlStore) KeyMakers(ctx context.Context, accountID string) (map[string]string, error) {
	out := map[string]string{}
	err := s.db.read().queryEach(ctx, `SELECT id, created_by FROM keys WHERE account_id = $1 AND created_by IS NOT NULL`,
		[]any{accountID}, func(row scanner) error {
			var k, m string
			if err := row.Scan(&k, &m); err != nil {
				return err
			}
			out[k] = m
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("store: key makers: %w", err)
	}
	return out, nil
}

// AddTeamMember puts a member of the team's account in the team (again:
// nothing changes); ErrNotFound if the team or the member is not the
// account's.
func (s *sqlStore) AddTeamMember(ctx context.Context, accountID, teamID, memberID string) error {
	err := s.db.inTx(ctx, func(q querier) error {
		// Locks the team's row against a delete at the same time.
		var one int
		if err := q.queryRow(ctx, `UPDATE teams SET name = name WHERE id = $1 AND account_id = $2 RETURNING 1`,
			teamID, accountID).Scan(&one); err != nil {
			return err
		}
		if err := q.queryRow(ctx, `SELECT 1 FROM members WHERE id = $1 AND account_id = $2`, memberID, accountID).Scan(&one); err != nil {
			return err
		}
		_, err := q.exec(ctx, `INSERT INTO team_members (team_id, member_id, created_at) VALUES ($1, $2, $3)
			ON CONFLICT (team_id, member_id) DO NOTHING`, teamID, memberID, dbTime(s.now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("store: add team member: %w", err)
	}
	return nil
}

// RemoveTeamMember takes a member out of a team of the account;
// ErrNotFound if it is not in it.
func (s *sqlStore) RemoveTeamMember(ctx context.Context, accountID, teamID, memberID string) error {
	err := s.db.inTx(ctx, func(q querier) error {
		n, err := q.exec(ctx, `DELETE FROM team_members WHERE team_id = $2 AND member_id = $3
			AND team_id IN (SELECT id FROM teams WHERE account_id = $1)`, accountID, teamID, memberID)
		if err == nil && n == 0 {
			err = ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("store: remove team member: %w", err)
	}
	return nil
}

// TeamMembers are the members in the team, oldest first.
func (s *sqlStore) TeamMembers(ctx context.Context, teamID string) ([]Member, error) {
	return s.members(ctx, "team members", `id IN (SELECT member_id FROM team_members WHERE team_id = $1)`, teamID)
}

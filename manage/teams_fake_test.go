package manage

import (
	"context"

	"github.com/tollgate/tollgate/store"
)

// The fake store keeps no teams: the team rules are tested on a real
// store (teams_test.go).

func (f *fakeStore) CreateTeam(context.Context, store.Team) (store.Team, error) {
	return store.Team{}, errFake
}

func (f *fakeStore) TeamByID(context.Context, string) (store.Team, error) {
	return store.Team{}, store.ErrNotFound
}

func (f *fakeStore) ListTeams(context.Context, string) ([]store.Team, error) {
	return []store.Team{}, nil
}

func (f *fakeStore) UpdateTeam(context.Context, store.Team) (store.Team, error) {
	return store.Team{}, errFake
}

func (f *fakeStore) DeleteTeam(context.Context, string, string) error { return errFake }

func (f *fakeStore) SetKeyTeam(context.Context, string, string) (store.Key, error) {
	return store.Key{}, errFake
}

func (f *fakeStore) SetTeamBudgets(context.Context, string, string, []store.Budget) ([]store.Budget, error) {
	return nil, errFake
}

func (f *fakeStore) TeamBudgets(context.Context, string, string) ([]store.Budget, error) {
	return []store.Budget{}, nil
}

func (f *fakeStore) KeyTeams(context.Context, string) (map[string]string, error) {
	return map[string]string{}, nil
}

func (f *fakeStore) KeyMakers(context.Context, string) (map[string]string, error) {
	return map[string]string{}, nil
}

func (f *fakeStore) AddTeamMember(context.Context, string, string, string) error { return errFake }

func (f *fakeStore) RemoveTeamMember(context.Context, string, string, string) error { return errFake }

func (f *fakeStore) TeamMembers(context.Context, string) ([]store.Member, error) {
	return []store.Member{}, nil
}

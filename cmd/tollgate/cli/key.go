package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/store"
)

// keyRules are the checks keyopts applies for this configuration: model ids
// must exist in it; with no configuration any well-formed id is accepted.
func keyRules(e *env, cfg *config.Config) keyopts.Rules {
	r := keyopts.Rules{Now: e.now}
	if cfg != nil {
		r.KnownModel = func(id string) bool {
			_, ok := cfg.Model(id)
			return ok
		}
	}
	return r
}

// keyPrefix is the configuration's key prefix, or the default without one.
func keyPrefix(cfg *config.Config) string {
	if cfg == nil {
		return apikey.DefaultPrefix
	}
	return cfg.KeyPrefix
}

// keyByID finds a live key, saying so plainly when there is none.
func keyByID(ctx context.Context, s store.Store, id string) (store.Key, error) {
	k, err := s.KeyByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Key{}, fmt.Errorf("no key with id %q", id)
	}
	if err != nil {
		return store.Key{}, err
	}
	return k, nil
}

package cli

import (
	"context"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// keyByID finds a live key, saying so plainly when there is none.
func keyByID(ctx context.Context, svc *manage.Service, id string) (store.Key, error) {
	k, err := svc.GetKey(ctx, cliActor, id)
	if err != nil {
		return store.Key{}, notFound(err, "no key with id %q", id)
	}
	return k, nil
}

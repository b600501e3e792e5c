package edge

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

type otherKey struct{}

func TestTheProviderRequestsContextCarriesTheConnectTimeoutToTheDialer(t *testing.T) {
	parent := context.WithValue(t.Context(), otherKey{}, "kept")
	c := &connectCtx{Context: parent, timeout: 3 * time.Second}
	child, cancel := context.WithCancel(c) // as send makes the request's
	defer cancel()
	assert.Equal(t, 3*time.Second, child.Value(connectTimeoutKey{}), "what the dialer reads")
	assert.Equal(t, "kept", child.Value(otherKey{}), "the parent's values")
	assert.Nil(t, parent.Value(connectTimeoutKey{}))

	ended, end := context.WithCancel(t.Context())
	c = &connectCtx{Context: ended, timeout: time.Second}
	child, cancel = context.WithCancel(c)
	defer cancel()
	end()
	select {
	case <-child.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the request's context did not end with its parent")
	}
}

func TestStatusStringsAreTheStatusesDigits(t *testing.T) {
	for _, code := range []int{0, 99, 200, 429, 599, 600, 999, -1} {
		assert.Equal(t, strconv.Itoa(code), statusString(code))
	}
	assert.Equal(t, 0.0, testing.AllocsPerRun(10, func() { _ = statusString(503) }))
}

package edge

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tollgate/tollgate/config"
)

func TestAWriteToTheClientWaitsAtMostTheIdleTimeoutAndNeverPastTheRequestTimeout(t *testing.T) {
	now := time.Unix(1750000000, 0)
	end, cancel := context.WithDeadline(context.Background(), now.Add(10*time.Second))
	defer cancel()
	a := &attempt{ep: Endpoint{IdleTimeout: 3 * time.Second}, reqCtx: end}
	assert.Equal(t, now.Add(3*time.Second), a.writeDeadline(now), "the idle timeout from now")
	assert.Equal(t, now.Add(10*time.Second+finalWriteGrace), a.writeDeadline(now.Add(9*time.Second)),
		"the request timeout, and a moment for the last event")
	assert.Equal(t, now.Add(10*time.Second+finalWriteGrace), a.writeDeadline(now.Add(20*time.Second)),
		"past the request timeout, no later")

	a = &attempt{reqCtx: context.Background()}
	assert.Equal(t, now.Add(config.DefaultStreamIdleTimeout), a.writeDeadline(now), "the default idle timeout")
}

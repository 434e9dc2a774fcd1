package mcpvisor

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A call without a deadline gets the default one; a caller's deadline,
// shorter or longer, is kept.
func TestWithDefaultTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := withDefaultTimeout(context.Background(), time.Minute)
		defer cancel()
		d, ok := ctx.Deadline()
		require.True(t, ok, "a context without a deadline gets one")
		assert.Equal(t, time.Minute, time.Until(d))

		for _, callers := range []time.Duration{time.Second, time.Hour} {
			parent, cancelParent := context.WithTimeout(context.Background(), callers)
			ctx, cancel := withDefaultTimeout(parent, time.Minute)
			d, _ := ctx.Deadline()
			assert.Equal(t, callers, time.Until(d), "the caller's deadline wins")
			cancel()
			assert.NoError(t, parent.Err(), "cancel does not end the caller's context")
			cancelParent()
		}
	})
}

package mcpvisor

import (
	"context"
	"io"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/inproc"
)

// inBubble runs test in a testing/synctest bubble with a supervisor whose
// servers run in process (the mock, with the options given by name):
// time is the bubble's fake clock, so backoff delays, pings and stable
// timers play out at once and exactly, and synctest.Wait replaces polling
// (it returns when every goroutine of the supervisor is blocked: every
// message has been handled). The supervisor is closed at the end, inside
// the bubble, which fails if a goroutine outlives it.
func inBubble(t *testing.T, opts Options, servers map[string]mockserver.Options, test func(t *testing.T, s *Supervisor)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		opts.InProcess = map[string]inproc.Server{}
		for name, o := range servers {
			opts.InProcess[name] = inproc.ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
				mockserver.Run(ctx, o, r, w)
				return nil
			})
		}
		s, err := Start(context.Background(), opts)
		require.NoError(t, err)
		test(t, s)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, s.Close(ctx))
		// Protoactor's dead-letter throttle keeps a goroutine for one
		// interval (100 ms, see Start) after a burst of dead letters (a
		// message to a stopped actor); on the fake clock it ends at once.
		time.Sleep(time.Second)
	})
	// Pooled objects made in the bubble hold its channels; a later test
	// outside it must not reuse them. Two collections empty every sync.Pool.
	runtime.GC()
	runtime.GC()
}

// inProcess is the config of a server of Options.InProcess.
func inProcess() ServerConfig {
	return ServerConfig{Config: transports.Config{Type: transports.TypeSDK}}
}

// settleInBubble applies servers and waits (on the fake clock) until they
// settled.
func settleInBubble(t *testing.T, s *Supervisor, servers map[string]ServerConfig) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := s.SetServers(ctx, servers)
	require.NoError(t, err)
	require.NoError(t, s.WaitSettled(ctx))
}

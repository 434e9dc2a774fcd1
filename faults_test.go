package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

// Every fault the mock server can play ends a call with a result or a
// typed error by the call's deadline, and leaves no process behind.
func TestFaultModesEndCallsByTheirDeadlineAndLeaveNoProcess(t *testing.T) {
	const deadline = 2 * time.Second
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, res *protocol.CallToolResult, err error)
	}{
		{"exits mid-session", []string{"-exit-after", "1"}, func(t *testing.T, _ *protocol.CallToolResult, err error) {
			assert.ErrorIs(t, err, session.ErrConnectionClosed)
		}},
		{"hang on call", []string{"-hang-on-call"}, func(t *testing.T, _ *protocol.CallToolResult, err error) {
			var te *session.TimeoutError
			assert.ErrorAs(t, err, &te)
		}},
		{"garbage on stdout", []string{"-garbage"}, func(t *testing.T, res *protocol.CallToolResult, err error) {
			require.NoError(t, err)
			assert.Equal(t, "x", res.Content[0].Text)
		}},
		// Over a 1 MiB limit: 20 MB over the default 16 MiB took longer than
		// the call's deadline to write and read under -race on a loaded
		// machine, and the call timed out first.
		{"oversize frame", []string{"-oversize", "2000000"}, func(t *testing.T, _ *protocol.CallToolResult, err error) {
			var tooBig *transports.FrameTooLargeError
			assert.ErrorAs(t, err, &tooBig)
		}},
		{"ignores SIGTERM", []string{"-ignore-sigterm"}, func(t *testing.T, res *protocol.CallToolResult, err error) {
			assert.NoError(t, err)
		}},
		{"spawns a grandchild", []string{"-grandchild"}, func(t *testing.T, res *protocol.CallToolResult, err error) {
			assert.NoError(t, err)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions
			opts.MaxFrameSize = 1 << 20
			s, err := Start(context.Background(), opts)
			require.NoError(t, err)
			setAndSettle(t, s, map[string]ServerConfig{"f": mock(tt.args...)})
			require.Equal(t, StateReady, statusOf(s, "f").State, statusOf(s, "f").LastError)
			pid := pidOf(s, "f")
			if tt.args[0] == "-exit-after" {
				_, err := s.CallTool(context.Background(), "mcp__f__echo", json.RawMessage(`{"text":"x"}`))
				require.NoError(t, err, "the first call is answered")
			}

			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			began := time.Now()
			res, err := s.CallTool(ctx, "mcp__f__echo", json.RawMessage(`{"text":"x"}`))
			cancel()
			assert.Less(t, time.Since(began), deadline+500*time.Millisecond, "the call ended by its deadline")
			if err != nil {
				assert.False(t, errors.Is(err, context.Canceled), "a typed error, not a bare cancellation: %v", err)
			}
			tt.check(t, res, err)

			closeCtx, cancelClose := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancelClose()
			require.NoError(t, s.Close(closeCtx))
			assert.Empty(t, stdiotest.WaitGroupGone(pid, 3*time.Second), "no process of the server's group remains")
		})
	}
}

package mcpvisor

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// everything returns the config of server-everything over stdio.
func everything(t *testing.T) ServerConfig {
	return ServerConfig{Config: transports.Config{Command: everythingBin(t)}}
}

// settleEverything sets server-everything up as "ev" and waits until it
// is ready. Settled is not enough: on a loaded machine a Node process
// may start too slowly for its first connect (testOptions'
// ConnectTimeout), and the server settles reconnecting; its next attempt
// succeeds. (TestEverythingProgress called its tool then: "unknown
// tool", 1 run in 5 of make flake.)
func settleEverything(t *testing.T, s *Supervisor) {
	t.Helper()
	setAndSettle(t, s, map[string]ServerConfig{"ev": everything(t)})
	for deadline := time.Now().Add(testwait.Patience); statusOf(s, "ev").State != StateReady; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			st := statusOf(s, "ev")
			t.Fatalf("waited %v for server-everything to be ready; it is %s (%s)", testwait.Patience, st.State, st.LastError)
		}
	}
}

// awaitTool waits until the pool offers the tool (server-everything adds
// its capability-dependent tools just after initialization).
func awaitTool(t *testing.T, s *Supervisor, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, tool := range s.Tools() {
			if tool.Name == name {
				return true
			}
		}
		return false
	}, 15*time.Second, 10*time.Millisecond, "tool %s never offered", name)
}

func toolText(t *testing.T, s *Supervisor, name, args string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, name, json.RawMessage(args))
	require.NoError(t, err)
	var b strings.Builder
	for _, c := range res.Content {
		b.WriteString(c.Text)
		b.WriteByte('\n')
	}
	require.False(t, res.IsError, b.String())
	return b.String()
}

// server-everything's sampling, elicitation and roots tools reach the
// host's handlers; a form accepted without values gets the schema's
// defaults; roots changed with SetRoots reach the server.
func TestEverythingServerToClientRequests(t *testing.T) {
	t.Parallel()
	var sampled, elicited atomic.Int32
	opts := testOptions
	opts.Roots = []protocol.Root{{URI: "file:///work/first", Name: "first"}}
	opts.Sampling = func(ctx context.Context, server string, req *protocol.CreateMessageParams) (*protocol.CreateMessageResult, error) {
		sampled.Add(1)
		assert.Equal(t, "ev", server)
		var c protocol.Content
		require.NoError(t, json.Unmarshal(req.Messages[0].Content, &c))
		return &protocol.CreateMessageResult{Role: "assistant", Model: "host-model", Content: protocol.TextContent("sampled: " + c.Text), StopReason: "endTurn"}, nil
	}
	opts.Elicitation = func(ctx context.Context, server string, req *protocol.ElicitParams) (*protocol.ElicitResult, error) {
		elicited.Add(1)
		if req.Mode == "url" {
			return &protocol.ElicitResult{Action: protocol.ElicitAccept}, nil
		}
		return &protocol.ElicitResult{Action: protocol.ElicitAccept}, nil // no values: the defaults apply
	}
	opts.ElicitationURL = true
	s := start(t, opts)
	settleEverything(t, s)

	tool := func(name string) string { n := QualifiedName("ev", name); awaitTool(t, s, n); return n }

	out := toolText(t, s, tool("trigger-sampling-request"), `{"prompt":"what is 2+2","maxTokens":20}`)
	assert.Contains(t, out, `sampled: Resource trigger-sampling-request context: what is 2+2`)
	assert.Equal(t, int32(1), sampled.Load())

	out = toolText(t, s, tool("trigger-elicitation-request"), `{}`)
	assert.Contains(t, out, "It was a dark and stormy night.", "the schema's default was filled in")
	assert.Equal(t, int32(1), elicited.Load())

	out = toolText(t, s, tool("trigger-url-elicitation"), `{"url":"https://example.com/login","message":"log in"}`)
	assert.Contains(t, strings.ToLower(out), "accept")
	assert.Equal(t, int32(2), elicited.Load())

	out = toolText(t, s, tool("get-roots-list"), `{}`)
	assert.Contains(t, out, "file:///work/first")

	told, err := s.Roots().Set(t.Context(), []protocol.Root{{URI: "file:///work/second", Name: "second"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"ev"}, told)
	assert.Eventually(t, func() bool {
		return strings.Contains(toolText(t, s, tool("get-roots-list"), `{}`), "file:///work/second")
	}, 10*time.Second, 100*time.Millisecond, "the server listed the roots again after roots/list_changed")
}

// Capabilities are declared only for the handlers the host registered.
func TestClientCapabilitiesFollowHandlers(t *testing.T) {
	assert.Equal(t, protocol.ClientCapabilities{}, clientCapabilities(&Options{}))
	caps := clientCapabilities(&Options{Roots: []protocol.Root{}, Elicitation: func(context.Context, string, *protocol.ElicitParams) (*protocol.ElicitResult, error) { return nil, nil }})
	require.NotNil(t, caps.Roots)
	assert.True(t, caps.Roots.ListChanged)
	assert.Nil(t, caps.Sampling)
	require.NotNil(t, caps.Elicitation)
	assert.JSONEq(t, `{"form":{}}`, string(*caps.Elicitation))
	_, err := (&Supervisor{opts: runOptions{host: newHostState(runOptions{})}, closed: make(chan struct{})}).Roots().Set(t.Context(), nil)
	assert.ErrorIs(t, err, ErrRootsNotDeclared)
}

// Progress from server-everything's long-running operation reaches the
// caller.
func TestEverythingProgress(t *testing.T) {
	t.Parallel()
	s := start(t, testOptions)
	settleEverything(t, s)
	var n atomic.Int32
	res, err := s.CallToolWith(t.Context(), QualifiedName("ev", "trigger-long-running-operation"), json.RawMessage(`{"duration":1,"steps":3}`),
		CallOptions{Progress: func(p protocol.ProgressParams) { n.Add(1) }})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	assert.Equal(t, int32(3), n.Load())
}

package mcpvisor_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// approver is an Options.ApproveCall that records what it was asked and
// says yes to the tools in yes.
type approver struct {
	mu   sync.Mutex
	yes  map[string]bool
	fail error
	seen []mcpvisor.CallApproval
}

func (a *approver) approve(_ context.Context, req mcpvisor.CallApproval) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, req)
	return a.yes[req.Tool], a.fail
}

// asked returns what the approver was asked since the last call, and
// forgets it.
func (a *approver) asked() []mcpvisor.CallApproval {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.seen
	a.seen = nil
	return out
}

// Every call of a server's tool is checked before it is sent: deny beats
// ask beats allow, then the server's trust level; an untrusted server's
// calls go through the approver; built-in tools need no permission.
func TestPermissionRulesAndTrustGateEveryCall(t *testing.T) {
	ctx := testwait.Context(t)
	appr := &approver{yes: map[string]bool{"mcp__a__fail": true, "mcp__wary__add": true}}
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{
		Permissions: mcpvisor.PermissionRules{
			Allow: []string{"mcp__a__*", "mcp__wary__echo"},
			Ask:   []string{"mcp__*__fail", "mcp__a__sleep"},
			Deny:  []string{"mcp__*__add", "mcp__a__sleep"},
		},
		ApproveCall: appr.approve,
		Builtins: []mcpvisor.BuiltinTool{{Definition: protocol.Tool{Name: "host_add"},
			Call: func(context.Context, json.RawMessage) (*protocol.CallToolResult, error) {
				return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent("host")}}, nil
			}}},
	})
	require.NoError(t, err)
	defer sup.Close(ctx)
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"a":    {Config: mockserver.Command()},
		"wary": {Config: mockserver.Command(), Trust: mcpvisor.TrustUntrusted},
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	echo := map[string]any{"text": "hi"}
	add := map[string]any{"a": 1, "b": 2}

	// Allowed: nothing asked.
	_, err = sup.CallTool(ctx, "mcp__a__echo", echo)
	require.NoError(t, err)
	assert.Empty(t, appr.asked())

	// Deny beats allow; deny beats ask (mcp__a__sleep is in both).
	_, err = sup.CallTool(ctx, "mcp__a__add", add)
	require.ErrorIs(t, err, mcpvisor.ErrCallDenied)
	assert.Contains(t, err.Error(), `deny rule "mcp__*__add"`)
	_, err = sup.CallTool(ctx, "mcp__a__sleep", map[string]any{"ms": 1})
	require.ErrorIs(t, err, mcpvisor.ErrCallDenied)
	assert.Empty(t, appr.asked(), "a denied call asks nobody")

	// Ask beats allow: the approver says yes.
	res, err := sup.CallTool(ctx, "mcp__a__fail", nil)
	require.NoError(t, err)
	assert.True(t, res.IsError, "the call went through to the server")
	seen := appr.asked()
	require.Len(t, seen, 1)
	assert.Equal(t, mcpvisor.CallApproval{Tool: "mcp__a__fail", Server: "a", ServerTool: "fail",
		Reason: `ask rule "mcp__*__fail"`}, seen[0])

	// An untrusted server: asked unless an allow rule matches.
	_, err = sup.CallTool(ctx, "mcp__wary__echo", echo)
	require.NoError(t, err)
	assert.Empty(t, appr.asked(), `mcp__wary__echo matches an allow rule`)
	_, err = sup.Server("wary").CallTool(ctx, "announce", map[string]any{"text": "x"})
	require.Error(t, err)
	require.ErrorIs(t, err, mcpvisor.ErrCallDenied, "the approver said no")
	seen = appr.asked()
	require.Len(t, seen, 1)
	assert.Equal(t, `the server's trust is "untrusted"`, seen[0].Reason)
	assert.JSONEq(t, `{"text":"x"}`, string(seen[0].Arguments))

	// Built-in tools need no permission, even under a deny rule for all.
	require.NoError(t, sup.SetPermissions(mcpvisor.PermissionRules{Deny: []string{"*"}}))
	res, err = sup.CallTool(ctx, "host_add", nil)
	require.NoError(t, err)
	assert.Equal(t, "host", res.Content[0].Text)
	_, err = sup.CallTool(ctx, "mcp__a__echo", echo)
	require.ErrorIs(t, err, mcpvisor.ErrCallDenied, "SetPermissions applies to the next call")

	// An approver that fails refuses the call, typed.
	require.NoError(t, sup.SetPermissions(mcpvisor.PermissionRules{}))
	appr.fail = errors.New("nobody to ask")
	_, err = sup.CallTool(ctx, "mcp__wary__echo", echo)
	require.ErrorIs(t, err, mcpvisor.ErrApprovalUnavailable)
	assert.Contains(t, err.Error(), "nobody to ask")

	assert.Error(t, sup.SetPermissions(mcpvisor.PermissionRules{Ask: []string{"mcp__[x"}}), "a bad glob is refused")
}

// Without an approver, a call that needs approval is refused, typed; the
// other calls go ahead. A bad rule fails Start.
func TestCallsNeedingApprovalWithoutApprover(t *testing.T) {
	ctx := testwait.Context(t)
	_, err := mcpvisor.Start(ctx, mcpvisor.Options{Permissions: mcpvisor.PermissionRules{Deny: []string{"["}}})
	require.Error(t, err, "an invalid pattern is refused at Start")

	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{Permissions: mcpvisor.PermissionRules{Ask: []string{"mcp__a__add"}}})
	require.NoError(t, err)
	defer sup.Close(ctx)
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"a": {Config: mockserver.Command()},
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	_, err = sup.CallTool(ctx, "mcp__a__add", map[string]any{"a": 1, "b": 2})
	require.ErrorIs(t, err, mcpvisor.ErrApprovalUnavailable)
	assert.Contains(t, err.Error(), "no approver is configured")
	_, err = sup.CallTool(ctx, "mcp__a__echo", map[string]any{"text": "x"})
	require.NoError(t, err)
}

// A server whose trust is "sandbox" runs confined, as with
// "sandbox": true.
func TestTrustSandboxRunsConfined(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox mechanisms tested here are Linux's")
	}
	requireMechanism(t, transports.SandboxBwrap)
	ctx := testwait.Context(t)
	sup, err := mcpvisor.Start(ctx, sandboxOptions(t.TempDir()))
	require.NoError(t, err)
	defer sup.Close(ctx)
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"boxed": {Config: mockserver.Command(), Trust: mcpvisor.TrustSandbox},
		"free":  {Config: mockserver.Command()},
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	st := statusOf(sup, "boxed")
	require.Equal(t, mcpvisor.StateReady, st.State, st.LastError)
	assert.NotEmpty(t, st.Sandbox, "confined by trust alone")
	assert.Empty(t, statusOf(sup, "free").Sandbox)
	_, err = sup.CallTool(ctx, "mcp__boxed__echo", map[string]any{"text": "x"})
	require.NoError(t, err)

	// Raising a running server to "sandbox" restarts it confined; going
	// back restarts it unconfined.
	res, err := sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"boxed": {Config: mockserver.Command()},
		"free":  {Config: mockserver.Command(), Trust: mcpvisor.TrustSandbox},
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"boxed", "free"}, res.Reconnected, "a change to or from trust \"sandbox\" replaces the connection")
	assert.NotEmpty(t, statusOf(sup, "free").Sandbox, "restarted confined")
	assert.Empty(t, statusOf(sup, "boxed").Sandbox, "restarted unconfined")
}

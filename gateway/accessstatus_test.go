package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/gateway/access"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// StatusFor tells a caller under access rules nothing of what it may not
// use: not the other servers, nor the excluded ones it may not use, nor
// the token estimate of tools it may not call (the total, and its
// server's, without the denied tool); Status (the operator's) still has
// everything.
func TestGatewayStatusForShowsOnlyTheCallersOwn(t *testing.T) {
	cfg, err := access.Parse([]byte(`[{"match": {"groups": "team-x"}, "servers": {"allow": ["a", "x"]}, "tools": {"deny": ["mcp__a__fail"]}}]`))
	require.NoError(t, err)
	policy, err := access.Compile(cfg)
	require.NoError(t, err)
	sup := upstream(t, map[string]mcpvisor.ServerConfig{
		"a": {Config: mockserver.Command("-name", "a")},
		"b": {Config: mockserver.Command("-name", "b")},
	})
	g := gateway.New(sup, gateway.Options{Access: policy})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(ctx, 5*time.Millisecond)
	}()
	t.Cleanup(func() {
		g.Close()
		cancel()
		testwait.Done(t, done, "the gateway's Run to return")
	})
	g.SetExcluded(map[string]string{"x": "not sandboxed", "z": "not sandboxed"})

	caller := gateway.WithIdentity(context.Background(), gateway.Identity{Subject: "u", Groups: []string{"team-x"}})
	var mine gateway.StatusReport
	require.Eventually(t, func() bool {
		mine = g.StatusFor(caller)
		return mine.Tools == 4
	}, testwait.Patience, 10*time.Millisecond, "a's tools but fail: %+v", &mine)
	all := g.Status()
	require.Len(t, all.Servers, 2)

	require.Len(t, mine.Servers, 1)
	assert.Equal(t, "a", mine.Servers[0].Name)
	assert.Equal(t, []gateway.ExcludedReport{{Name: "x", Reason: "not sandboxed"}}, mine.Excluded)
	assert.Len(t, g.Status().Excluded, 2, "the operator's list is untouched")
	assert.Positive(t, mine.ToolTokens)
	assert.Equal(t, mine.Servers[0].ToolTokens, mine.ToolTokens, "the total is of its own server's tools")
	assert.Less(t, mine.ToolTokens, all.ToolTokens)
	for _, s := range all.Servers {
		if s.Name == "a" {
			assert.Less(t, mine.Servers[0].ToolTokens, s.ToolTokens, "without the denied tool")
		}
	}
}

package mcpvisor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/config"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// statusByName indexes a supervisor's status.
func statusByName(sup *mcpvisor.Supervisor) map[string]mcpvisor.ServerStatus {
	out := map[string]mcpvisor.ServerStatus{}
	for _, st := range sup.Status() {
		out[st.Name] = st
	}
	return out
}

// The checklist of an agent SDK's MCP client, walked through the API a
// host ported from it calls: every one of the five statuses reached, a
// toggled-off server keeps its connection and offers no tools,
// SetServers reports added, removed and errors, and Connect, Disconnect,
// Server(name).Status, Server(name).CallTool, Resources().List and Resources().Read do what
// their names say.
func TestHostAPIChecklist(t *testing.T) {
	ctx := testwait.Context(t)
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	require.NoError(t, err)
	defer sup.Close(ctx)

	locked, err := mockserver.NewHandler(mockserver.Options{HTTP401: true})
	require.NoError(t, err)
	authSrv := httptest.NewServer(locked)
	defer authSrv.Close()

	ok := mcpvisor.ServerConfig{Config: mockserver.Command("-resources", "2"), Scope: "project"}
	ok.Env["API_KEY"] = "env-secret-1"
	res, err := sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"ok":   ok,
		"bad":  {Config: transports.Config{Command: "mcpvisor-no-such-server"}, Scope: "user"},
		"auth": {Config: transports.Config{Type: transports.TypeHTTP, URL: authSrv.URL + "/mcp?key=url-secret-2", Headers: map[string]string{"Authorization": "Bearer header-secret-3"}}},
		"lazy": {Config: mockserver.Command(), Lazy: true},
		"off":  {Config: mockserver.Command(), Disabled: true},
		"bare": {}, // neither command nor url
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	assert.Equal(t, []string{"auth", "bad", "lazy", "off", "ok"}, res.Added)
	require.Contains(t, res.Errors, "bare", "an entry with neither command nor url is refused")
	assert.True(t, res.Settled, "every server settled: %v", res.Unsettled)

	// Every status value, beside the detailed state.
	st := statusByName(sup)
	for name, want := range map[string]mcpvisor.ConnectionStatus{
		"ok": mcpvisor.StatusConnected, "bad": mcpvisor.StatusFailed, "auth": mcpvisor.StatusNeedsAuth,
		"lazy": mcpvisor.StatusPending, "off": mcpvisor.StatusDisabled,
	} {
		assert.Equal(t, want, st[name].Status, "%s (state %s, error %s)", name, st[name].State, st[name].LastError)
	}
	assert.Equal(t, "project", st["ok"].Scope)
	assert.Equal(t, "user", st["bad"].Scope)

	// The tools of a connected server, with their annotations.
	require.Len(t, st["ok"].Tools, st["ok"].OfferedTools)
	require.NotEmpty(t, st["ok"].Tools)
	var echo mcpvisor.ToolInfo
	for _, ti := range st["ok"].Tools {
		if ti.Name == "echo" {
			echo = ti
		}
	}
	assert.Equal(t, "mcp__ok__echo", echo.PoolName)
	assert.NotEmpty(t, echo.Description)
	require.NotNil(t, echo.Annotations, "echo is annotated read-only")
	require.NotNil(t, echo.Annotations.ReadOnly)
	assert.True(t, *echo.Annotations.ReadOnly)
	assert.Empty(t, st["bad"].Tools)

	// The config is shown, its secrets are not.
	assert.Equal(t, "stdio", st["ok"].Config.Type)
	assert.Equal(t, mcpvisor.Redacted, st["ok"].Config.Env["API_KEY"])
	assert.Equal(t, mcpvisor.Redacted, st["auth"].Config.Headers["Authorization"])
	doc, err := json.Marshal(sup.Status())
	require.NoError(t, err)
	for _, secret := range []string{"env-secret-1", "url-secret-2", "header-secret-3"} {
		assert.NotContains(t, string(doc), secret)
	}

	// A toggled-off server keeps its connection and offers no tools.
	require.NoError(t, sup.Server("ok").Toggle(ctx, false))
	off, err := sup.Server("ok").Status()
	require.NoError(t, err)
	assert.Equal(t, mcpvisor.StatusDisabled, off.Status)
	assert.Equal(t, mcpvisor.StateReady, off.State, "still connected")
	assert.Equal(t, st["ok"].ConnectedSince, off.ConnectedSince, "the same connection")
	assert.Empty(t, off.Tools)
	_, err = sup.Server("ok").CallTool(ctx, "echo", map[string]string{"text": "x"})
	assert.ErrorIs(t, err, mcpvisor.ErrServerOff)
	require.NoError(t, sup.Server("ok").Toggle(ctx, true))
	on, err := sup.Server("ok").Status()
	require.NoError(t, err)
	assert.Equal(t, mcpvisor.StatusConnected, on.Status)
	assert.Len(t, on.Tools, len(st["ok"].Tools))

	// Resources by server.
	resources, _, err := sup.Resources().List("ok")
	require.NoError(t, err)
	require.Len(t, resources, 2)
	read, err := sup.Resources().Read(ctx, "ok", resources[0].Resource.URI)
	require.NoError(t, err)
	require.NotEmpty(t, read.Contents)

	// Connect one server, call it by server and tool, disconnect it; the
	// others are not touched.
	added, err := sup.Connect(ctx, "extra", mcpvisor.ServerConfig{Config: mockserver.Command()})
	require.NoError(t, err)
	assert.Equal(t, mcpvisor.StatusConnected, added.Status)
	assert.NotEmpty(t, added.Tools)
	out, err := sup.Server("extra").CallTool(ctx, "echo", map[string]string{"text": "by server"})
	require.NoError(t, err)
	assert.Equal(t, "by server", out.Content[0].Text)
	_, err = sup.Server("extra").CallTool(ctx, "no_such_tool", nil)
	assert.ErrorIs(t, err, mcpvisor.ErrUnknownTool)
	require.NoError(t, sup.Server("extra").Disconnect(ctx))
	_, err = sup.Server("extra").Status()
	assert.ErrorIs(t, err, mcpvisor.ErrUnknownServer)
	for _, tl := range sup.Tools() {
		assert.NotEqual(t, "extra", tl.Server, "a disconnected server's tools leave the pool")
	}
	assert.ErrorIs(t, sup.Server("extra").Disconnect(ctx), mcpvisor.ErrUnknownServer)
	again, err := sup.Server("ok").Status()
	require.NoError(t, err)
	assert.Equal(t, st["ok"].ConnectedSince, again.ConnectedSince, "Connect and Disconnect leave other servers alone")
	_, err = sup.Connect(ctx, "broken", mcpvisor.ServerConfig{})
	assert.Error(t, err, "a config without command or url")

	// SetServers reports what it removed.
	res, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{"ok": ok})
	require.NoError(t, err)
	assert.Equal(t, []string{"auth", "bad", "lazy", "off"}, res.Removed)
	assert.Equal(t, []string{"ok"}, res.Unchanged)
}

// Connect returns a server that failed as failed, and a config change
// of a failed server reconnects it.
func TestConnectReportsFailure(t *testing.T) {
	ctx := testwait.Context(t)
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	require.NoError(t, err)
	defer sup.Close(ctx)
	st, err := sup.Connect(ctx, "s", mcpvisor.ServerConfig{Config: transports.Config{Command: "mcpvisor-no-such-server"}})
	require.NoError(t, err, "a server that fails is a status, not an error")
	assert.Equal(t, mcpvisor.StatusFailed, st.Status)
	st, err = sup.Connect(ctx, "s", mcpvisor.ServerConfig{Config: mockserver.Command()})
	require.NoError(t, err)
	assert.Equal(t, mcpvisor.StatusConnected, st.Status)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = sup.Connect(cctx, "t", mcpvisor.ServerConfig{Config: mockserver.Command()})
	assert.ErrorIs(t, err, context.Canceled)
}

// LoadConfig records each entry's layer as its scope.
func TestLoadConfigSetsScope(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	writeConfig(t, home, ".mcp.json", `{"mcpServers": {"u": {"command": "u"}}}`)
	writeConfig(t, dir, ".mcp.local.json", `{"mcpServers": {"l": {"command": "l"}}}`)
	cfg, err := config.Load(config.Options{Home: home, Dir: dir, ManagedFile: dir + "/none.json"})
	require.NoError(t, err)
	assert.Equal(t, config.LayerUser, cfg.Servers["u"].Scope)
	assert.Equal(t, config.LayerLocal, cfg.Servers["l"].Scope)
}

func TestStatusOfEveryState(t *testing.T) {
	for state, want := range map[mcpvisor.State]mcpvisor.ConnectionStatus{
		mcpvisor.StateReady:         mcpvisor.StatusConnected,
		mcpvisor.StatePending:       mcpvisor.StatusPending,
		mcpvisor.StateConnecting:    mcpvisor.StatusPending,
		mcpvisor.StateReconnecting:  mcpvisor.StatusPending,
		mcpvisor.StateNeedsApproval: mcpvisor.StatusPending,
		mcpvisor.StateFailed:        mcpvisor.StatusFailed,
		mcpvisor.StateStopped:       mcpvisor.StatusFailed,
		mcpvisor.StateNeedsAuth:     mcpvisor.StatusNeedsAuth,
		mcpvisor.StateDisabled:      mcpvisor.StatusDisabled,
	} {
		assert.Equal(t, want, mcpvisor.StatusOf(state, false), state)
		assert.Equal(t, mcpvisor.StatusDisabled, mcpvisor.StatusOf(state, true), "%s toggled off", state)
	}
}

func writeConfig(t *testing.T, dir, name, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
}

// The errors of calls are the root package's own types (errors.As finds
// them without importing anything else), and errors.Is still matches the
// sentinels under them.
func TestCallErrorsAreTheHostsTypes(t *testing.T) {
	ctx := testwait.Context(t)
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	require.NoError(t, err)
	defer sup.Close(ctx)
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"bad":   {Config: transports.Config{Command: "mcpvisor-no-such-server"}},
		"dying": {Config: mockserver.Command("-exit-after", "1")},
		"slow":  {Config: mockserver.Command()},
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)

	err = sup.Server("bad").Ping(ctx)
	var nr *mcpvisor.NotReadyError
	require.ErrorAs(t, err, &nr)
	assert.Equal(t, "bad", nr.Server)
	assert.Equal(t, mcpvisor.StateFailed, nr.State)
	assert.ErrorIs(t, err, mcpvisor.ErrServerNotReady)
	assert.NotNil(t, nr.Cause, "the server's last error")

	_, err = sup.CallTool(ctx, "mcp__dying__echo", map[string]string{"text": "1"})
	require.NoError(t, err)
	_, err = sup.CallTool(ctx, "mcp__dying__echo", map[string]string{"text": "2"})
	var lost *mcpvisor.ConnectionLostError
	require.ErrorAs(t, err, &lost, "the server exits on this call: %v", err)
	assert.Equal(t, "dying", lost.Server)
	assert.ErrorIs(t, err, mcpvisor.ErrConnectionClosed)
	assert.Equal(t, lost.Error(), err.Error())

	// A call past its deadline: a *TimeoutError of the root package, which
	// is a net.Error and still matches both sentinels.
	callCtx, cancelCall := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelCall()
	_, err = sup.CallTool(callCtx, "mcp__slow__sleep", map[string]int{"ms": 30_000})
	var te *mcpvisor.TimeoutError
	require.ErrorAs(t, err, &te, "the call outlives its deadline: %v", err)
	assert.Equal(t, protocol.MethodToolsCall, te.Method)
	assert.True(t, te.Sent)
	assert.ErrorIs(t, err, mcpvisor.ErrTimeout)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout())
	assert.Equal(t, te.Error(), err.Error())
}

// Server(name).CallTool reaches the server named, also when its tool was
// renamed after a collision of pool names.
func TestCallServerToolFollowsARename(t *testing.T) {
	ctx := testwait.Context(t)
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	require.NoError(t, err)
	defer sup.Close(ctx)
	// Both qualify to mcp__x_y__echo: one of them is renamed.
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"x.y": {Config: mockserver.Command()},
		"x_y": {Config: mockserver.Command()},
	}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	calls := func(server string) uint64 {
		st, err := sup.Server(server).Status()
		require.NoError(t, err)
		return st.Latency.Calls
	}
	for _, server := range []string{"x_y", "x.y"} {
		before := calls(server)
		_, err := sup.Server(server).CallTool(ctx, "echo", map[string]string{"text": "hi"})
		require.NoError(t, err, server)
		assert.Equal(t, before+1, calls(server), "the call reached %s", server)
	}
}

// Connect with a changed config of a lazy server returns once the new
// config is in place, though the server stays pending (no state event).
func TestConnectChangesALazyServer(t *testing.T) {
	ctx := testwait.Context(t)
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	require.NoError(t, err)
	defer sup.Close(ctx)
	lazy := mcpvisor.ServerConfig{Config: mockserver.Command("-name", "v1"), Lazy: true}
	st, err := sup.Connect(ctx, "l", lazy)
	require.NoError(t, err)
	assert.Equal(t, mcpvisor.StatusPending, st.Status)
	lazy.Config = mockserver.Command("-name", "v2")
	st, err = sup.Connect(ctx, "l", lazy)
	require.NoError(t, err)
	assert.Equal(t, mcpvisor.StatusPending, st.Status)
	assert.Contains(t, st.Config.Args, "-name", "the status shows the new config")
	assert.Contains(t, st.Config.Args, "v2")
}

// A server Connect returns ready has its tools in the status, even while
// other servers connect (the registry then folds ready servers into the
// tool pool in batches, so a status read at the instant the server turned
// ready could show it connected with no tools yet).
func TestConnectReturnsAReadyServerWithItsTools(t *testing.T) {
	ctx := testwait.Context(t)
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	require.NoError(t, err)
	defer sup.Close(ctx)
	wave := map[string]mcpvisor.ServerConfig{}
	for i := range 8 {
		wave[fmt.Sprintf("w%d", i)] = mcpvisor.ServerConfig{Config: mockserver.Command()}
	}
	_, err = sup.SetServers(ctx, wave)
	require.NoError(t, err)
	var wg sync.WaitGroup
	got := make([]mcpvisor.ServerStatus, 6)
	errs := make([]error, 6)
	for i := range got {
		wg.Go(func() {
			got[i], errs[i] = sup.Connect(ctx, fmt.Sprintf("c%d", i), mcpvisor.ServerConfig{Config: mockserver.Command()})
		})
	}
	wg.Wait() // testwait:ok each Connect ends with ctx, which testwait.Context bounds
	for i, st := range got {
		require.NoError(t, errs[i])
		require.Equal(t, mcpvisor.StatusConnected, st.Status, st.LastError)
		assert.NotEmpty(t, st.Tools, "c%d is connected: its tools are in its status", i)
		assert.Len(t, st.Tools, st.OfferedTools)
	}
}

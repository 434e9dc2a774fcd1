package management

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/interop"
	"github.com/mcpvisor/mcpvisor/internal/mgmtscript"
	"github.com/mcpvisor/mcpvisor/transports"
)

// TestMain serves the mock server and the stdio helper when the test
// binary is started as one (bench/mockserver's fork/exec), and checks that
// the tests leak no goroutine.
func TestMain(m *testing.M) {
	mcpvisor.HelperMain()
	if mockserver.IsRequested() {
		os.Exit(mockserver.Main(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

var updateGolden = flag.Bool("update", false, "rewrite the golden files of the tests that have them")

// managedSupervisor starts a supervisor offering the management tools,
// with the servers of the management script: m (a mock with resources
// and subscriptions) and lazy (a lazy mock, for connect_mcp).
func managedSupervisor(t *testing.T) *mcpvisor.Supervisor {
	t.Helper()
	ctx := t.Context()
	var sup atomic.Pointer[mcpvisor.Supervisor]
	tools := Tools(sup.Load)
	_, err := tools[0].Call(ctx, nil)
	require.ErrorIs(t, err, ErrNotStarted, "a tool called before Start")
	s, err := mcpvisor.Start(ctx, mcpvisor.Options{Builtins: tools})
	require.NoError(t, err)
	sup.Store(s)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, s.Close(cctx))
	})
	_, err = s.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"m":    {Config: mockserver.Command("-subscribe", "-resources", "2"), ProtocolVersion: "2025-11-25"},
		"lazy": {Config: mockserver.Command(), Lazy: true},
	}, mcpvisor.AwaitSettled(20*time.Second))
	require.NoError(t, err)
	return s
}

// checkGolden compares got with the golden file name of the management
// tools (rewritten with -update).
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("..", mgmtscript.Dir, name)
	if *updateGolden {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to create %s", path)
	require.Equal(t, string(want), string(got), "%s changed (regenerate with -update only when that is intended)", path)
}

// The management tools' definitions and, step by step through the
// script, their outputs are pinned word for word (TestManagementToolShapes
// checks their shapes against the SDK's): the golden files are shared with
// the gateway's TestGatewayManagementTools, which pins the same through
// the gateway, so that the library and the gateway answer alike. The
// script ends with connect_mcp bringing a lazy server's tools into the
// pool.
func TestManagementToolAnswers(t *testing.T) {
	defs, err := mgmtscript.Render(Definitions())
	require.NoError(t, err)
	checkGolden(t, "definitions.golden.json", defs)

	s := managedSupervisor(t)
	steps, err := mgmtscript.Load("..")
	require.NoError(t, err)
	var answers []mgmtscript.Answer
	for _, step := range steps {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		res, err := s.CallTool(ctx, step.Tool, step.Args)
		cancel()
		require.NoError(t, err, step.Tool)
		a, err := mgmtscript.Record(step, res)
		require.NoError(t, err)
		answers = append(answers, a)
	}
	got, err := mgmtscript.Render(answers)
	require.NoError(t, err)
	checkGolden(t, "answers.golden.json", got)

	// connect_mcp's connect put the lazy server's tools in the pool; the
	// script ends connected.
	assert.Contains(t, toolNames(s), "mcp__lazy__echo")
}

// A subscription made with SubscribeMcpResource delivers the server's
// updates as events, and a polling subscription its changes.
func TestManagementToolsDeliverEvents(t *testing.T) {
	s := managedSupervisor(t)
	ctx := t.Context()
	events := s.Subscribe(ctx)
	call := func(name, args string) map[string]any {
		t.Helper()
		res, err := s.CallTool(ctx, name, json.RawMessage(args))
		require.NoError(t, err)
		require.False(t, res.IsError, res.Content[0].Text)
		var out map[string]any
		require.NoError(t, json.Unmarshal(res.StructuredContent, &out))
		return out
	}
	sub := call(ToolSubscribeMcpResource, `{"server":"m","uri":"mock://resource/1"}`)
	assert.Equal(t, true, sub["subscribed"])
	assert.Equal(t, []string{"mock://resource/1"}, s.Resources().Subscriptions("m"))
	_, err := s.CallTool(ctx, "mcp__m__touch", map[string]string{"uri": "mock://resource/1"})
	require.NoError(t, err)
	awaitEvent(t, events, mcpvisor.EventResourceUpdated, func(ev mcpvisor.Event) bool { return ev.(*mcpvisor.ResourceUpdatedEvent).URI == "mock://resource/1" })

	poll := call(ToolSubscribePolling, `{"type":"resource","server":"m","uri":"mock://resource/1","intervalMs":1000}`)
	awaitEvent(t, events, mcpvisor.EventPollChanged, func(ev mcpvisor.Event) bool { return ev.(*mcpvisor.PollChangedEvent).PollID == poll["subscriptionId"] })
	assert.Equal(t, mcpvisor.MinPollInterval, s.Polling().List()[poll["subscriptionId"].(string)].Interval)
	out := call(ToolUnsubscribePolling, `{"subscriptionId":"`+poll["subscriptionId"].(string)+`"}`)
	assert.Equal(t, true, out["unsubscribed"])
	assert.Empty(t, s.Polling().List())
}

// A blob is described, not dumped: server-everything's binary resources.
func TestReadMcpResourceDescribesBlobs(t *testing.T) {
	var sup atomic.Pointer[mcpvisor.Supervisor]
	s, err := mcpvisor.Start(t.Context(), mcpvisor.Options{Builtins: Tools(sup.Load)})
	require.NoError(t, err)
	sup.Store(s)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, s.Close(cctx))
	})
	_, err = s.SetServers(t.Context(), map[string]mcpvisor.ServerConfig{"everything": {Config: transports.Config{Command: everything(t)}}},
		mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, ToolReadMcpResource, map[string]string{"server": "everything", "uri": "demo://resource/dynamic/blob/1"})
	require.NoError(t, err)
	require.False(t, res.IsError, res.Content[0].Text)
	var out struct {
		Contents []struct {
			URI       string `json:"uri"`
			MimeType  string `json:"mimeType"`
			Text      string `json:"text"`
			Blob      string `json:"blob"`
			BlobBytes int    `json:"blobBytes"`
		} `json:"contents"`
	}
	require.NoError(t, json.Unmarshal(res.StructuredContent, &out))
	require.Len(t, out.Contents, 1)
	c := out.Contents[0]
	assert.Equal(t, "demo://resource/dynamic/blob/1", c.URI)
	assert.Empty(t, c.Blob, "the blob is not dumped")
	assert.Positive(t, c.BlobBytes)
	assert.Contains(t, c.Text, "bytes, not shown")
}

func toolNames(s *mcpvisor.Supervisor) []string {
	var out []string
	for _, t := range s.Tools() {
		out = append(out, t.Name)
	}
	return out
}

// awaitEvent waits up to 10 s for an event of type typ that ok accepts.
func awaitEvent(t *testing.T, events <-chan mcpvisor.Event, typ mcpvisor.EventType, ok func(mcpvisor.Event) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, open := <-events:
			require.True(t, open, "the event stream ended while waiting for %s", typ)
			if ev.Header().Type == typ && ok(ev) {
				return
			}
		case <-deadline:
			t.Fatalf("no %s event within 10 s", typ)
		}
	}
}

// everything returns the path of server-everything's binary (make test
// installs it and sets MCPVISOR_SERVER_EVERYTHING), or skips the test
// (fails it under MCPVISOR_REQUIRE_INTEROP, as in make test).
func everything(t *testing.T) string {
	t.Helper()
	if path := os.Getenv("MCPVISOR_SERVER_EVERYTHING"); path != "" {
		if abs, err := filepath.Abs(path); err == nil {
			if _, err := os.Stat(abs); err == nil {
				return abs
			}
		}
	}
	msg := "MCPVISOR_SERVER_EVERYTHING does not name server-everything (make npm-deps installs it)"
	interop.Missing(t, msg)
	return ""
}

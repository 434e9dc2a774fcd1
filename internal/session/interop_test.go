package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

// Interoperability tests: the session layer against MCP servers whose
// protocol code nobody on this project wrote.
//
//   - @modelcontextprotocol/server-everything (npm, TypeScript SDK), found
//     through MCPVISOR_SERVER_EVERYTHING (make test installs it and sets it);
//   - testdata/gosdkserver, built here with the official Go SDK.

const (
	// interopConnectTimeout is generous: server-everything takes about a
	// second to answer its first request, more on a loaded machine.
	interopConnectTimeout = 20 * time.Second
	interopCallTimeout    = 10 * time.Second
	interopCloseTimeout   = 10 * time.Second
)

// wireLog records what crossed the wire during a session: the requests and
// notifications mcpvisor sent, and the error codes the server answered
// them with. It says which negotiation path a session took.
type wireLog struct {
	mu       sync.Mutex
	sent     []sentFrame
	methodOf map[string]string // request id → method
	errCode  map[string]int64  // method → code of the last error answering it
}

type sentFrame struct {
	Method string
	Params json.RawMessage
}

func newWireLog() *wireLog {
	return &wireLog{methodOf: map[string]string{}, errCode: map[string]int64{}}
}

func (w *wireLog) methods() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, len(w.sent))
	for i, f := range w.sent {
		out[i] = f.Method
	}
	return out
}

// errorCode returns the code of the error the server answered method with,
// and whether it answered it with an error at all.
func (w *wireLog) errorCode(method string) (int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	code, ok := w.errCode[method]
	return code, ok
}

// initializeVersion returns the protocolVersion mcpvisor asked for in
// initialize, or "" when it sent none.
func (w *wireLog) initializeVersion() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.sent {
		if f.Method == protocol.MethodInitialize {
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			_ = json.Unmarshal(f.Params, &p)
			return p.ProtocolVersion
		}
	}
	return ""
}

// wireConn records the frames mcpvisor sends.
type wireConn struct {
	transports.Conn
	log *wireLog
}

func (c *wireConn) Send(ctx context.Context, frame []byte) error {
	if m, err := protocol.Decode(frame); err == nil && m.Method != "" {
		c.log.mu.Lock()
		c.log.sent = append(c.log.sent, sentFrame{Method: m.Method, Params: append(json.RawMessage(nil), m.Params...)})
		if m.Kind == protocol.KindRequest {
			c.log.methodOf[m.ID.String()] = m.Method
		}
		c.log.mu.Unlock()
	}
	return c.Conn.Send(ctx, frame)
}

// wireReceiver records the error answers the server sends.
type wireReceiver struct {
	transports.Receiver
	log *wireLog
}

func (r *wireReceiver) Frame(data []byte) {
	if m, err := protocol.Decode(data); err == nil && m.Kind == protocol.KindResponse && m.Error != nil {
		r.log.mu.Lock()
		if method, ok := r.log.methodOf[m.ID.String()]; ok {
			r.log.errCode[method] = m.Error.Code
		}
		r.log.mu.Unlock()
	}
	r.Receiver.Frame(data)
}

// openInterop starts cfg's server over stdio and negotiates a session. The
// session is closed, and the server's process group checked gone, when
// the test ends.
func openInterop(t *testing.T, cfg transports.Config, opts session.Options) (*session.Session, *wireLog) {
	t.Helper()
	w := newWireLog()
	var conn *stdio.Conn
	dial := func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
		c, err := stdio.Dial(ctx, cfg, stdio.Options{}, &wireReceiver{Receiver: r, log: w})
		if err != nil {
			return nil, err
		}
		conn = c
		return &wireConn{Conn: c, log: w}, nil
	}
	if opts.ClientInfo.Name == "" {
		opts.ClientInfo = protocol.Implementation{Name: "mcpvisor-interop-test", Version: "0"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), interopConnectTimeout)
	defer cancel()
	s, err := session.Open(ctx, dial, opts)
	// Cleanups run last-registered first: close, then check the group.
	if conn != nil {
		pid := conn.Pid()
		t.Cleanup(func() {
			assert.Empty(t, stdiotest.WaitGroupGone(pid, 5*time.Second), "the server's process group must be gone")
		})
	}
	if err != nil {
		stderr := ""
		if conn != nil {
			stderr = conn.StderrTail(20)
		}
		require.NoError(t, err, "connecting to %s %v (sent %v); server stderr:\n%s", cfg.Command, cfg.Args, w.methods(), stderr)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), interopCloseTimeout)
		defer cancel()
		assert.NoError(t, s.Close(ctx, nil), "closing the session")
	})
	return s, w
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), interopCallTimeout)
	t.Cleanup(cancel)
	return ctx
}

func toolNames(tools []protocol.Tool) []string {
	names := make([]string, len(tools))
	for i, tool := range tools {
		names[i] = tool.Name
	}
	return names
}

// textOf joins the text blocks of content.
func textOf(content []protocol.Content) string {
	var parts []string
	for _, c := range content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// everythingCommand returns the path of the server-everything binary, or
// skips the test when it is not installed (fails it instead when
// MCPVISOR_REQUIRE_INTEROP=1, as make test sets).
func everythingCommand(t *testing.T) string {
	t.Helper()
	path := os.Getenv("MCPVISOR_SERVER_EVERYTHING")
	problem := ""
	if path == "" {
		problem = "MCPVISOR_SERVER_EVERYTHING is not set"
	} else if abs, err := filepath.Abs(path); err != nil {
		problem = fmt.Sprintf("MCPVISOR_SERVER_EVERYTHING=%s: %v", path, err)
	} else if _, err := os.Stat(abs); err != nil {
		problem = fmt.Sprintf("MCPVISOR_SERVER_EVERYTHING=%s: %v", path, err)
	} else {
		path = abs
	}
	if problem != "" {
		msg := problem + ": @modelcontextprotocol/server-everything is not installed " +
			"(make npm-deps installs it; point MCPVISOR_SERVER_EVERYTHING at .deps/npm/node_modules/.bin/mcp-server-everything)"
		if os.Getenv("MCPVISOR_REQUIRE_INTEROP") == "1" {
			t.Fatal(msg + "; MCPVISOR_REQUIRE_INTEROP=1 makes this a failure")
		}
		t.Skip(msg)
	}
	return path
}

func TestServerEverythingInterop(t *testing.T) {
	command := everythingCommand(t)
	tests := []struct {
		name         string
		opts         session.Options
		wantVersion  string
		wantRejected bool
		wantSent     []string // the methods sent to negotiate
	}{
		// The TypeScript SDK (1.32.x) behind server-everything knows only the
		// handshake eras: it answers server/discover with method-not-found,
		// and the session falls back to initialize at the newest handshake
		// version, which the server accepts. The probe waits for that
		// answer: with the default 3 s, a Node process still starting on a
		// loaded machine was taken for a silent server (its probe then
		// cancelled, a notifications/cancelled on the wire: 25 runs in 25
		// beside three busy loops). Silence has tests of its own.
		{"a discover answered with method-not-found falls back to initialize", session.Options{DiscoverTimeout: interopConnectTimeout}, protocol.Version20251125, true,
			[]string{"server/discover", "initialize", "notifications/initialized"}},
		{"pinned 2025-06-18", session.Options{ProtocolVersion: protocol.Version20250618}, protocol.Version20250618, false,
			[]string{"initialize", "notifications/initialized"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, wire := openInterop(t, transports.Config{Command: command}, tt.opts)
			t.Logf("server-everything negotiated %s (discover rejected: %v)", s.Peer().Version, s.Peer().DiscoverRejected)
			assert.Equal(t, tt.wantVersion, s.Peer().Version)
			assert.Equal(t, tt.wantRejected, s.Peer().DiscoverRejected)
			assert.Equal(t, tt.wantSent, wire.methods())
			assert.Equal(t, tt.wantVersion, wire.initializeVersion(), "initialize asks for the version the server then chose")
			if tt.wantRejected {
				code, ok := wire.errorCode(protocol.MethodDiscover)
				assert.True(t, ok, "server/discover was answered with an error")
				assert.Equal(t, int64(protocol.CodeMethodNotFound), code)
			}
			assert.Equal(t, "mcp-servers/everything", s.Peer().Info.Name)
			assert.NotNil(t, s.Peer().Capabilities.Tools)
			assert.NotNil(t, s.Peer().Capabilities.Resources)
			assert.NotNil(t, s.Peer().Capabilities.Prompts)

			exerciseEverything(t, s)
		})
	}
}

func exerciseEverything(t *testing.T, s *session.Session) {
	require.NoError(t, s.Ping(callCtx(t)))

	tools, err := s.Lists().Tools(callCtx(t))
	require.NoError(t, err)
	names := toolNames(tools)
	assert.Contains(t, names, "echo")
	assert.Contains(t, names, "get-sum")

	res, err := s.CallTool(callCtx(t), "echo", json.RawMessage(`{"message":"hello from mcpvisor"}`), nil)
	require.NoError(t, err)
	assert.False(t, res.IsError, "echo failed: %s", textOf(res.Content))
	assert.Contains(t, textOf(res.Content), "hello from mcpvisor")

	res, err = s.CallTool(callCtx(t), "get-sum", json.RawMessage(`{"a":2,"b":40}`), nil)
	require.NoError(t, err)
	assert.False(t, res.IsError, "get-sum failed: %s", textOf(res.Content))
	assert.Contains(t, textOf(res.Content), "42")

	// A tool's own failure (here: arguments its schema rejects) is a result,
	// not a protocol error.
	res, err = s.CallTool(callCtx(t), "get-sum", json.RawMessage(`{"a":"two"}`), nil)
	require.NoError(t, err)
	assert.True(t, res.IsError)

	resources, err := s.Lists().Resources(callCtx(t))
	require.NoError(t, err)
	var static *protocol.Resource
	for i := range resources {
		if strings.HasPrefix(resources[i].URI, "demo://resource/static/") {
			static = &resources[i]
			break
		}
	}
	require.NotNil(t, static, "server-everything lists static demo resources; got %d resources", len(resources))
	rr, err := s.ReadResource(callCtx(t), static.URI)
	require.NoError(t, err)
	require.NotEmpty(t, rr.Contents)
	assert.Equal(t, static.URI, rr.Contents[0].URI)
	assert.NotEmpty(t, rr.Contents[0].Text+rr.Contents[0].Blob, "resource %s has contents", static.URI)

	prompts, err := s.Lists().Prompts(callCtx(t))
	require.NoError(t, err)
	byName := map[string]protocol.Prompt{}
	for _, p := range prompts {
		byName[p.Name] = p
	}
	require.Contains(t, byName, "simple-prompt")
	require.Contains(t, byName, "args-prompt")

	gp, err := s.GetPrompt(callCtx(t), "simple-prompt", nil)
	require.NoError(t, err)
	require.NotEmpty(t, gp.Messages)
	assert.NotEmpty(t, gp.Messages[0].Content.Text)

	// args-prompt: give every argument the listing marks required.
	args := map[string]string{}
	var required []string
	for _, a := range byName["args-prompt"].Arguments {
		if a.Required {
			required = append(required, a.Name)
			args[a.Name] = "Value-of-" + a.Name
		}
	}
	assert.Equal(t, []string{"city"}, required, "args-prompt's required arguments")
	gp, err = s.GetPrompt(callCtx(t), "args-prompt", args)
	require.NoError(t, err)
	require.NotEmpty(t, gp.Messages)
	for _, v := range args {
		assert.Contains(t, gp.Messages[0].Content.Text, v)
	}
}

// notificationLog is a session.Handler that keeps every notification.
type notificationLog struct {
	mu  sync.Mutex
	got []receivedNotification
}

type receivedNotification struct {
	Method string
	Params json.RawMessage
}

func (n *notificationLog) Notification(method string, params json.RawMessage) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, receivedNotification{method, append(json.RawMessage(nil), params...)})
}

func (n *notificationLog) Closed(error) {}

// progress returns the progress notifications carrying token.
func (n *notificationLog) progress(t *testing.T, token string) []protocol.ProgressParams {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []protocol.ProgressParams
	for _, m := range n.got {
		if m.Method != protocol.NotificationProgress {
			continue
		}
		var p protocol.ProgressParams
		require.NoError(t, json.Unmarshal(m.Params, &p))
		if string(p.ProgressToken) == token {
			out = append(out, p)
		}
	}
	return out
}

func TestServerEverythingProgressAndCancellation(t *testing.T) {
	command := everythingCommand(t)
	notes := &notificationLog{}
	s, wire := openInterop(t, transports.Config{Command: command}, session.Options{Handler: notes})

	// Progress: the caller's _meta reaches the server, and the server's
	// progress notifications reach the handler, all before the result.
	meta := protocol.Meta{"progressToken": json.RawMessage(`"interop-progress"`)}
	res, err := s.CallTool(callCtx(t), "trigger-long-running-operation", json.RawMessage(`{"duration":0.5,"steps":5}`), meta)
	require.NoError(t, err)
	assert.False(t, res.IsError, "the operation failed: %s", textOf(res.Content))
	assert.Contains(t, textOf(res.Content), "completed")
	progress := notes.progress(t, `"interop-progress"`)
	require.Len(t, progress, 5, "one progress notification per step")
	for i, p := range progress {
		assert.Equal(t, float64(i+1), p.Progress)
		if assert.NotNil(t, p.Total) {
			assert.Equal(t, float64(5), *p.Total)
		}
	}

	// Cancellation: a call abandoned by its deadline fails with a
	// TimeoutError, the server is told, and the session stays usable.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = s.CallTool(ctx, "trigger-long-running-operation", json.RawMessage(`{"duration":5,"steps":5}`), nil)
	var te *session.TimeoutError
	require.ErrorAs(t, err, &te)
	assert.True(t, te.Sent)
	assert.Zero(t, s.InFlight(), "a timed-out call leaves no waiter")
	assert.Eventually(t, func() bool {
		methods := wire.methods()
		return methods[len(methods)-1] == protocol.NotificationCancelled
	}, 2*time.Second, 10*time.Millisecond, "notifications/cancelled is sent")

	res, err = s.CallTool(callCtx(t), "echo", json.RawMessage(`{"message":"still here"}`), nil)
	require.NoError(t, err)
	assert.Contains(t, textOf(res.Content), "still here")
}

// buildGoSDKServer builds testdata/gosdkserver, a nested module with its
// own go.mod, into a directory removed when t ends.
func buildGoSDKServer(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", "..", "testdata", "gosdkserver"))
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "gosdkserver")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off") // the nested module builds on its own
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the go-sdk server in %s: %v\n%s", src, err, out)
	}
	return bin
}

func TestGoSDKInterop(t *testing.T) {
	// Built once for all the subtests.
	bin := buildGoSDKServer(t)
	tests := []struct {
		name         string
		args         []string
		opts         session.Options
		wantVersion  string
		wantRejected bool
		wantSent     []string // the methods sent to negotiate
		wantInit     string   // the version asked for in initialize, if sent
	}{
		{"default options: server/discover", nil, session.Options{},
			protocol.Version20260728, false, []string{"server/discover"}, ""},
		{"stateless-only server", []string{"-versions", "2026-07-28"}, session.Options{},
			protocol.Version20260728, false, []string{"server/discover"}, ""},
		{"pinned 2025-11-25: initialize", nil, session.Options{ProtocolVersion: protocol.Version20251125},
			protocol.Version20251125, false, []string{"initialize", "notifications/initialized"}, protocol.Version20251125},
		// A server without the stateless era answers server/discover with
		// UnsupportedProtocolVersion (-32022) listing only handshake
		// versions: the session falls back to initialize at the newest of
		// them.
		{"handshake-only server: -32022 then initialize", []string{"-versions", "2025-11-25,2025-06-18"}, session.Options{},
			protocol.Version20251125, true, []string{"server/discover", "initialize", "notifications/initialized"}, protocol.Version20251125},
		{"oldest handshake only", []string{"-versions", "2025-06-18"}, session.Options{},
			protocol.Version20250618, true, []string{"server/discover", "initialize", "notifications/initialized"}, protocol.Version20250618},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, wire := openInterop(t, transports.Config{Command: bin, Args: tt.args}, tt.opts)
			t.Logf("go-sdk server %v negotiated %s (discover rejected: %v)", tt.args, s.Peer().Version, s.Peer().DiscoverRejected)
			assert.Equal(t, tt.wantVersion, s.Peer().Version)
			assert.Equal(t, tt.wantRejected, s.Peer().DiscoverRejected)
			assert.Equal(t, tt.wantSent, wire.methods())
			assert.Equal(t, tt.wantInit, wire.initializeVersion())
			if tt.wantRejected {
				code, ok := wire.errorCode(protocol.MethodDiscover)
				assert.True(t, ok, "server/discover was answered with an error")
				assert.Equal(t, int64(protocol.CodeUnsupportedProtocolVersion), code)
			}
			assert.Equal(t, protocol.Implementation{Name: "gosdkserver", Version: "1.0.0"}, s.Peer().Info)
			assert.NotNil(t, s.Peer().Capabilities.Tools)
			assert.NotNil(t, s.Peer().Capabilities.Resources)
			assert.NotNil(t, s.Peer().Capabilities.Prompts)

			exerciseGoSDK(t, s)

			if protocol.UsesDiscover(s.Peer().Version) {
				assert.Equal(t, []string{protocol.MethodDiscover}, wire.methods()[:1], "no handshake in the stateless era")
				assert.NotContains(t, wire.methods(), protocol.MethodInitialize)
			}
		})
	}
}

func exerciseGoSDK(t *testing.T, s *session.Session) {
	// In the stateless era there is no ping: Ping asks server/discover.
	require.NoError(t, s.Ping(callCtx(t)))

	tools, err := s.Lists().Tools(callCtx(t))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"echo", "add"}, toolNames(tools))
	for _, tool := range tools {
		assert.JSONEq(t, `"object"`, string(schemaType(t, tool.InputSchema)), "%s input schema", tool.Name)
		if tool.Name == "add" {
			assert.NotEmpty(t, tool.OutputSchema, "add declares its structured output")
		}
	}

	res, err := s.CallTool(callCtx(t), "echo", json.RawMessage(`{"text":"hello from mcpvisor"}`), nil)
	require.NoError(t, err)
	assert.False(t, res.IsError, "echo failed: %s", textOf(res.Content))
	require.Len(t, res.Content, 1)
	assert.Equal(t, "text", res.Content[0].Type)
	assert.Equal(t, "hello from mcpvisor", res.Content[0].Text)
	assert.Contains(t, []string{"", "complete"}, res.ResultType)

	res, err = s.CallTool(callCtx(t), "add", json.RawMessage(`{"a":2,"b":40.5}`), nil)
	require.NoError(t, err)
	assert.False(t, res.IsError, "add failed: %s", textOf(res.Content))
	assert.Equal(t, "42.5", textOf(res.Content))
	assert.JSONEq(t, `{"sum":42.5}`, string(res.StructuredContent))

	// Arguments the input schema rejects: the go-sdk answers with a tool
	// error (a result), not a protocol error.
	res, err = s.CallTool(callCtx(t), "add", json.RawMessage(`{"a":"two","b":1}`), nil)
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, textOf(res.Content), "validating")

	// An unknown tool is a protocol error.
	_, err = s.CallTool(callCtx(t), "no-such-tool", json.RawMessage(`{}`), nil)
	var rpcErr *protocol.Error
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, int64(protocol.CodeInvalidParams), rpcErr.Code)

	resources, err := s.Lists().Resources(callCtx(t))
	require.NoError(t, err)
	require.Len(t, resources, 1)
	assert.Equal(t, "sdk://greeting", resources[0].URI)
	rr, err := s.ReadResource(callCtx(t), "sdk://greeting")
	require.NoError(t, err)
	require.Len(t, rr.Contents, 1)
	assert.Equal(t, protocol.ResourceContents{URI: "sdk://greeting", MimeType: "text/plain", Text: "hello from go-sdk"}, rr.Contents[0])

	// go-sdk ≥ 1.7 answers an unknown resource with -32602 (SEP-2164), not
	// the older -32002 (protocol.CodeResourceNotFound).
	_, err = s.ReadResource(callCtx(t), "sdk://nothing")
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, int64(protocol.CodeInvalidParams), rpcErr.Code)

	prompts, err := s.Lists().Prompts(callCtx(t))
	require.NoError(t, err)
	require.Len(t, prompts, 1)
	assert.Equal(t, "greet", prompts[0].Name)
	require.Len(t, prompts[0].Arguments, 1)
	assert.Equal(t, "name", prompts[0].Arguments[0].Name)
	assert.True(t, prompts[0].Arguments[0].Required)

	gp, err := s.GetPrompt(callCtx(t), "greet", map[string]string{"name": "Ada"})
	require.NoError(t, err)
	require.Len(t, gp.Messages, 1)
	assert.Equal(t, "user", gp.Messages[0].Role)
	assert.Equal(t, "Say hello to Ada.", gp.Messages[0].Content.Text)

	_, err = s.GetPrompt(callCtx(t), "greet", nil)
	require.ErrorAs(t, err, &rpcErr, "a missing required argument is an error")
	assert.Equal(t, int64(protocol.CodeInvalidParams), rpcErr.Code)

	assert.Zero(t, s.InFlight())
	assert.Zero(t, s.Stats(), "nothing skipped or dropped")
}

// schemaType returns the "type" member of a JSON Schema.
func schemaType(t *testing.T, schema json.RawMessage) json.RawMessage {
	t.Helper()
	var s struct {
		Type json.RawMessage `json:"type"`
	}
	require.NoError(t, json.Unmarshal(schema, &s))
	return s.Type
}

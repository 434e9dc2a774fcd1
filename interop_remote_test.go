package mcpvisor

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Interoperability tests of the remote transports: the whole supervisor
// (Supervisor) against MCP servers whose protocol code nobody on this project
// wrote, each run as a real process listening on 127.0.0.1:
//
//   - @modelcontextprotocol/server-everything (npm, TypeScript SDK) over
//     Streamable HTTP and over legacy HTTP+SSE, found through
//     MCPVISOR_SERVER_EVERYTHING as in session/interop_test.go;
//   - testdata/gosdkserver (official Go SDK) over Streamable HTTP, in the
//     stateless 2026-07-28 era and in the session era;
//   - testdata/mcpgoserver (mark3labs/mcp-go) over legacy HTTP+SSE and
//     over Streamable HTTP.
//
// For each: the server's tools join the pool, a tool call and a resource
// read succeed, a list_changed notification the server really sends
// changes what the supervisor offers, and after the server process is
// killed and started again on the same port the next call succeeds (the
// server actor re-initializes an expired session, or reconnects a dropped
// stream with backoff) and notifications flow again.
//
// A missing dependency (server-everything not installed, the nested
// modules' dependencies not downloaded) skips a test, or fails it when
// MCPVISOR_REQUIRE_INTEROP=1.

const (
	// remoteReady bounds a server process's start (listening on its port).
	remoteReady = 20 * time.Second
	// remoteCallTimeout bounds one call of the tests.
	remoteCallTimeout = 10 * time.Second
	// remoteEventually bounds what waits on the supervisor noticing a
	// change: a notification's effect, or recovery from a restart (a
	// reconnect backoff starts at 500 ms and doubles).
	remoteEventually = 30 * time.Second
	remoteTick       = 50 * time.Millisecond
)

// remoteOptions are testOptions with room for a slow first answer
// (server-everything takes about a second).
func remoteOptions() Options {
	opts := testOptions
	opts.ConnectTimeout = 20 * time.Second
	return opts
}

// missingDependency skips the test, or fails it when
// MCPVISOR_REQUIRE_INTEROP=1 (as make test sets).
func missingDependency(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("MCPVISOR_REQUIRE_INTEROP") == "1" {
		t.Fatal(msg + "; MCPVISOR_REQUIRE_INTEROP=1 makes this a failure")
	}
	t.Skip(msg)
}

// everythingBin returns the absolute path of mcp-server-everything, from
// MCPVISOR_SERVER_EVERYTHING.
func everythingBin(t *testing.T) string {
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
		missingDependency(t, problem+": @modelcontextprotocol/server-everything is not installed "+
			"(make npm-deps installs it; point MCPVISOR_SERVER_EVERYTHING at .deps/npm/node_modules/.bin/mcp-server-everything)")
	}
	return path
}

// nestedBuilds holds what buildNested built: each nested module once per
// test binary (two tests run testdata/gosdkserver), in a directory that
// RemoveNestedBuilds removes after the tests (TestMain). mu is held
// during a build, so that tests in parallel wait for the one build.
var nestedBuilds struct {
	mu   sync.Mutex
	dir  string
	bins map[string]string // testdata/<dir> -> its binary
}

// buildNested builds the nested module testdata/<dir> (its own go.mod)
// once per test binary and returns the binary. It never downloads:
// modules not in the cache (make deps downloads them) are a missing
// dependency.
func buildNested(t *testing.T, dir string) string {
	t.Helper()
	nestedBuilds.mu.Lock()
	defer nestedBuilds.mu.Unlock()
	if bin, ok := nestedBuilds.bins[dir]; ok {
		return bin
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		missingDependency(t, "the go command is not in PATH: cannot build testdata/"+dir)
	}
	src, err := filepath.Abs(filepath.Join("testdata", dir))
	require.NoError(t, err)
	if nestedBuilds.dir == "" {
		d, err := os.MkdirTemp("", "mcpvisor-nested-")
		require.NoError(t, err)
		nestedBuilds.dir, nestedBuilds.bins = d, map[string]string{}
	}
	bin := filepath.Join(nestedBuilds.dir, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		if bytes.Contains(out, []byte("GOPROXY=off")) {
			missingDependency(t, fmt.Sprintf("the modules of testdata/%s are not downloaded (make deps downloads them):\n%s", dir, out))
		}
		t.Fatalf("building testdata/%s: %v\n%s", dir, err, out)
	}
	nestedBuilds.bins[dir] = bin
	return bin
}

// RemoveNestedBuilds removes the binaries buildNested built, if any;
// TestMain calls it after the tests.
func RemoveNestedBuilds() {
	if nestedBuilds.dir != "" {
		os.RemoveAll(nestedBuilds.dir)
	}
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// outputBuffer collects a server's stdout and stderr over all its runs,
// quoted when a test fails and searched for trace lines. The servers
// print a line or two per request: it is not bounded.
type outputBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *outputBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *outputBuffer) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buf)
}

// since returns what was written from offset on.
func (b *outputBuffer) since(offset int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf[offset:])
}

func (b *outputBuffer) String() string { return b.since(0) }

// serverProcess is a remote MCP server run by a test on a fixed port of
// 127.0.0.1, in a process group of its own, so that it can be killed and
// started again on the same port. Not safe for concurrent use.
type serverProcess struct {
	t    *testing.T
	argv []string
	env  []string
	port int
	out  outputBuffer // stdout and stderr of every run

	runStart int // offset in out of the current run's output
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd has been waited for
}

// startServer starts argv (with env as its whole environment) and waits
// until it accepts connections on port. The process group is killed when
// the test ends.
func startServer(t *testing.T, port int, env []string, argv ...string) *serverProcess {
	t.Helper()
	p := &serverProcess{t: t, argv: argv, env: env, port: port}
	t.Cleanup(p.kill)
	p.start()
	return p
}

func (p *serverProcess) start() {
	p.t.Helper()
	require.Nil(p.t, p.cmd, "the server is already running")
	p.runStart = p.out.len()
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	ownGroup(cmd)
	require.NoError(p.t, cmd.Start(), "starting %v", p.argv)
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
	deadline := time.Now().Add(remoteReady)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			select {
			case <-exited: // another process has the port
			default:
				return
			}
		}
		select {
		case <-exited:
			p.cmd = nil
			p.t.Fatalf("%v exited before listening on %s: %v\noutput:\n%s", p.argv, addr, cmd.ProcessState, p.out.String())
		case <-time.After(remoteTick):
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%v does not listen on %s after %v\noutput:\n%s", p.argv, addr, remoteReady, p.out.String())
		}
	}
}

// kill SIGKILLs the process group and waits for the process.
func (p *serverProcess) kill() {
	if p.cmd == nil {
		return
	}
	killTree(p.cmd)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.t.Errorf("%v (pid %d) did not exit after SIGKILL", p.argv, p.cmd.Process.Pid)
	}
	p.cmd = nil
}

// restart kills the server and starts it again on the same port.
func (p *serverProcess) restart() {
	p.t.Helper()
	p.kill()
	p.start()
}

// runOutput returns what the current run printed so far.
func (p *serverProcess) runOutput() string { return p.out.since(p.runStart) }

func (p *serverProcess) url(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(p.port) + path
}

// remoteCase is one server reached over one remote transport.
type remoteCase struct {
	server      string // the configured server name
	cfg         ServerConfig
	proc        *serverProcess
	wantVersion string   // the protocol version negotiated
	wantInfo    string   // serverInfo.name
	wantTools   []string // tools the server lists (its own names)
	pingTool    string   // a tool (its own name) and arguments that succeed,
	pingArgs    string   // called until the restarted server answers
	call        func(t *testing.T, s *Supervisor, server string)
	resourceURI string // a resource to read …
	resourceHas string // … and text its contents hold
	notify      func(t *testing.T, s *Supervisor, server, suffix string)
	// listenTrace is the line the server prints (-trace) when it receives
	// subscriptions/listen; empty for an era without listen streams.
	listenTrace string
	// newSession says whether the restart ends the supervisor's session
	// (the server forgot the session id, or the SSE stream broke); a
	// stateless server's restart does not.
	newSession bool
	// lostAfterRestart, when set, says why the restarted server sends the
	// supervisor no notifications, so that none is awaited.
	lostAfterRestart string
}

// exercise runs the scenario every remote case shares.
func (rc remoteCase) exercise(t *testing.T) {
	s := start(t, remoteOptions())
	setAndSettle(t, s, map[string]ServerConfig{rc.server: rc.cfg})
	st := statusOf(s, rc.server)
	require.Equal(t, StateReady, st.State, "%s: %s\nserver output:\n%s", rc.server, st.LastError, rc.proc.out.String())
	t.Logf("%s over %s: protocol %s, server %s %s, %d tools, %d resources",
		rc.server, st.Transport, st.ProtocolVersion, st.ServerInfo.Name, st.ServerInfo.Version, st.ToolCount, st.Resources)
	assert.Equal(t, string(rc.cfg.Kind()), st.Transport)
	assert.Equal(t, rc.wantVersion, st.ProtocolVersion, "negotiated protocol version")
	assert.Equal(t, rc.wantInfo, st.ServerInfo.Name)

	// (1) The server's tools are pooled under their qualified names.
	pooled := poolNames(s, rc.server)
	for _, tool := range rc.wantTools {
		assert.Contains(t, pooled, QualifiedName(rc.server, tool))
	}

	// (2) Calls, (3) a resource read.
	rc.call(t, s, rc.server)
	readResource(t, s, rc.server, rc.resourceURI, rc.resourceHas)

	// (4) A notification changes what the supervisor offers.
	rc.notifyOnce(t, s, "before_restart")

	// (5) The server dies and comes back on the same port: a call succeeds
	// (perhaps after failing while the supervisor notices).
	before, err := s.liveSession(rc.server)
	require.NoError(t, err)
	rc.proc.restart()
	restarted := time.Now()
	var firstErr, lastErr error
	attempts := 0
	if !assert.Eventually(t, func() bool {
		attempts++
		ctx, cancel := context.WithTimeout(context.Background(), remoteCallTimeout)
		defer cancel()
		_, lastErr = s.CallTool(ctx, QualifiedName(rc.server, rc.pingTool), json.RawMessage(rc.pingArgs))
		if firstErr == nil {
			firstErr = lastErr
		}
		return lastErr == nil
	}, remoteEventually, remoteTick) {
		t.Fatalf("no call succeeded within %v of the restart; last error: %v; status: %+v\nserver output:\n%s",
			remoteEventually, lastErr, statusOf(s, rc.server), rc.proc.out.String())
	}
	t.Logf("a call succeeded %v after the restart (attempt %d; first failure: %v)", time.Since(restarted).Round(time.Millisecond), attempts, firstErr)
	st = statusOf(s, rc.server)
	assert.Equal(t, StateReady, st.State)
	assert.Equal(t, rc.wantVersion, st.ProtocolVersion, "the same era after the restart")
	after, err := s.liveSession(rc.server)
	require.NoError(t, err)
	if rc.newSession {
		assert.NotSame(t, before, after, "a new session replaced the one the restart ended")
	} else {
		assert.Same(t, before, after, "a stateless server's restart needs no new session")
	}
	rc.call(t, s, rc.server)
	readResource(t, s, rc.server, rc.resourceURI, rc.resourceHas)

	// Notifications reach the supervisor from the restarted server too.
	if rc.lostAfterRestart != "" {
		t.Logf("not checking notifications after the restart: %s", rc.lostAfterRestart)
		return
	}
	rc.notifyOnce(t, s, "after_restart")
}

// notifyOnce runs rc.notify. In the stateless era it first waits until
// the server has received subscriptions/listen, and afterwards checks that
// the stream was opened only once in this run of the server: the change
// was seen through a notification on it, not through the re-listing that
// follows a reopened stream.
func (rc remoteCase) notifyOnce(t *testing.T, s *Supervisor, suffix string) {
	t.Helper()
	if rc.listenTrace != "" {
		require.Eventually(t, func() bool { return strings.Contains(rc.proc.runOutput(), rc.listenTrace) },
			remoteEventually, remoteTick, "the supervisor opens subscriptions/listen (%s)", suffix)
	}
	rc.notify(t, s, rc.server, suffix)
	if rc.listenTrace != "" {
		assert.Equal(t, 1, strings.Count(rc.proc.runOutput(), rc.listenTrace), "subscriptions/listen opened once in this run of the server")
	}
}

// poolNames returns the qualified names of server's pooled tools.
func poolNames(s *Supervisor, server string) []string {
	var names []string
	for _, tool := range s.Tools() {
		if tool.Server == server {
			names = append(names, tool.Name)
		}
	}
	return names
}

func callText(t *testing.T, s *Supervisor, tool string, args string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), remoteCallTimeout)
	defer cancel()
	res, err := s.CallTool(ctx, tool, json.RawMessage(args))
	require.NoError(t, err, "calling %s", tool)
	require.False(t, res.IsError, "%s failed: %+v", tool, res.Content)
	var parts []string
	for _, c := range res.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func readResource(t *testing.T, s *Supervisor, server, uri, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), remoteCallTimeout)
	defer cancel()
	rr, err := s.Resources().Read(ctx, server, uri)
	require.NoError(t, err, "reading %s", uri)
	require.NotEmpty(t, rr.Contents)
	assert.Equal(t, uri, rr.Contents[0].URI)
	assert.Contains(t, rr.Contents[0].Text, want)
}

// announceNotify makes a server that offers the announce tool add a tool
// named after suffix, and checks that the supervisor re-lists on the
// server's tools/list_changed: the new tool joins the pool (with a
// tools_changed event) and can be called.
func announceNotify(t *testing.T, s *Supervisor, server, suffix string) {
	t.Helper()
	tool := "late_" + suffix
	qualified := QualifiedName(server, tool)
	require.NotContains(t, poolNames(s, server), qualified)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Subscribed before the call, so the event the call causes is seen.
	events := s.reg.subscribeRecords(ctx, false, 0, 256)
	assert.Equal(t, "added "+tool, callText(t, s, QualifiedName(server, "announce"), `{"name":"`+tool+`"}`))

	if !assert.Eventually(t, func() bool { return slices.Contains(poolNames(s, server), qualified) }, remoteEventually, remoteTick) {
		t.Fatalf("%s did not join the pool after tools/list_changed; pool: %v", qualified, poolNames(s, server))
	}
	deadline := time.After(remoteEventually)
	for seen := false; !seen; {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "the subscription ended")
			seen = ev.Type == EventToolsChanged && ev.Server == server
		case <-deadline:
			t.Fatalf("no tools_changed event for %s", server)
		}
	}
	assert.Equal(t, "hello", callText(t, s, qualified, `{"text":"hello"}`), "the announced tool is callable")
}

// loopbackPreload makes Node's TCP servers that would listen on every
// interface listen on 127.0.0.1 only: server-everything calls
// app.listen(PORT) and reads no host from its environment.
const loopbackPreload = `'use strict';
// mcpvisor's tests: listen on 127.0.0.1 instead of every interface.
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const a0 = args[0];
  if ((typeof a0 === 'number' || (typeof a0 === 'string' && /^[0-9]+$/.test(a0))) && typeof args[1] !== 'string') {
    args.splice(1, 0, '127.0.0.1');
  } else if (a0 && typeof a0 === 'object' && a0.port !== undefined && a0.host === undefined && a0.path === undefined) {
    args[0] = Object.assign({}, a0, { host: '127.0.0.1' });
  }
  return listen.apply(this, args);
};
`

// startEverything runs `mcp-server-everything mode` on a free port of
// 127.0.0.1. Its environment is minimal: it has a get-env tool.
func startEverything(t *testing.T, bin, mode string) *serverProcess {
	t.Helper()
	preload := filepath.Join(t.TempDir(), "loopback.cjs")
	require.NoError(t, os.WriteFile(preload, []byte(loopbackPreload), 0o600))
	port := freePort(t)
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"PORT=" + strconv.Itoa(port),
		"NODE_OPTIONS=--require " + preload,
	}
	return startServer(t, port, env, bin, mode)
}

// gzipNotify makes server-everything register a session resource with
// gzip-file-as-resource (from a data: URL, nothing is fetched), which
// sends notifications/resources/list_changed: the supervisor re-lists the
// resources, and the new one reads back as the gzip of the data.
func gzipNotify(t *testing.T, s *Supervisor, server, suffix string) {
	t.Helper()
	name := "interop-" + suffix + ".txt.gz"
	uri := "demo://resource/session/" + name
	payload := "hello from mcpvisor " + suffix
	args, err := json.Marshal(map[string]string{
		"name":       name,
		"data":       "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte(payload)),
		"outputType": "resourceLink",
	})
	require.NoError(t, err)
	require.False(t, hasResource(s, server, uri))

	ctx, cancel := context.WithTimeout(context.Background(), remoteCallTimeout)
	defer cancel()
	res, err := s.CallTool(ctx, QualifiedName(server, "gzip-file-as-resource"), args)
	require.NoError(t, err)
	require.False(t, res.IsError, "gzip-file-as-resource failed: %+v", res.Content)

	require.Eventually(t, func() bool { return hasResource(s, server, uri) },
		remoteEventually, remoteTick, "%s joins the server's resources after resources/list_changed", uri)
	rr, err := s.Resources().Read(ctx, server, uri)
	require.NoError(t, err)
	require.Len(t, rr.Contents, 1)
	assert.Equal(t, "application/gzip", rr.Contents[0].MimeType)
	blob, err := base64.StdEncoding.DecodeString(rr.Contents[0].Blob)
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(blob))
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Equal(t, payload, string(plain))
}

func hasResource(s *Supervisor, server, uri string) bool {
	rs, _, err := s.Resources().List(server)
	if err != nil {
		return false // not ready at this instant
	}
	for _, r := range rs {
		if r.Resource.URI == uri {
			return true
		}
	}
	return false
}

func TestRemoteInteropServerEverything(t *testing.T) {
	t.Parallel()
	bin := everythingBin(t)
	tests := []struct {
		mode string
		cfg  func(p *serverProcess) transports.Config
	}{
		// The TypeScript SDK knows only the handshake eras: it refuses the
		// stateless probe, and initialize settles on the newest handshake
		// version. Sessions (Mcp-Session-Id) live in the server's memory;
		// it answers an unknown one with 400 "No valid session ID
		// provided", which the transport reads as an expired session.
		{"streamableHttp", func(p *serverProcess) transports.Config {
			return transports.Config{Type: transports.TypeHTTP, URL: p.url("/mcp")}
		}},
		// Legacy HTTP+SSE: the session is the GET /sse stream; killing the
		// server ends it, and the actor reconnects with backoff.
		{"sse", func(p *serverProcess) transports.Config {
			return transports.Config{Type: transports.TypeSSE, URL: p.url("/sse")}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			proc := startEverything(t, bin, tt.mode)
			remoteCase{
				server:      "everything",
				cfg:         ServerConfig{Config: tt.cfg(proc)},
				proc:        proc,
				wantVersion: protocol.Version20251125,
				wantInfo:    "mcp-servers/everything",
				wantTools:   []string{"echo", "get-sum", "gzip-file-as-resource", "toggle-subscriber-updates"},
				pingTool:    "echo",
				pingArgs:    `{"message":"ping"}`,
				call: func(t *testing.T, s *Supervisor, server string) {
					assert.Equal(t, "Echo: hello from mcpvisor", callText(t, s, QualifiedName(server, "echo"), `{"message":"hello from mcpvisor"}`))
					assert.Contains(t, callText(t, s, QualifiedName(server, "get-sum"), `{"a":2,"b":40}`), "42")
				},
				resourceURI: "demo://resource/static/document/architecture.md",
				resourceHas: "Everything Server",
				notify:      gzipNotify,
				newSession:  true,
			}.exercise(t)
		})
	}
}

// goCall checks the echo and add tools of the two Go servers.
func goCall(t *testing.T, s *Supervisor, server string) {
	assert.Equal(t, "hello from mcpvisor", callText(t, s, QualifiedName(server, "echo"), `{"text":"hello from mcpvisor"}`))
	assert.Equal(t, "42.5", callText(t, s, QualifiedName(server, "add"), `{"a":2,"b":40.5}`))
}

func TestRemoteInteropGoSDK(t *testing.T) {
	t.Parallel()
	bin := buildNested(t, "gosdkserver")
	tests := []struct {
		name        string
		versions    string
		wantVersion string
		listen      bool
	}{
		// The server speaks 2026-07-28 (on a stateless handler): the
		// supervisor's server/discover probe finds it; no handshake, no
		// session, and list_changed comes only on the subscriptions/listen
		// stream the server actor opens by itself. A restart is invisible
		// but for the listen stream, which the actor reopens.
		{"stateless 2026-07-28", "", protocol.Version20260728, true},
		// A handshake-era server (stateful handler): -32022 to the probe,
		// then initialize and Mcp-Session-Id; notifications on the GET
		// stream; the restarted server answers the old session id with 404.
		{"session era", "2025-11-25,2025-06-18", protocol.Version20251125, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := freePort(t)
			argv := []string{bin, "-http", "127.0.0.1:" + strconv.Itoa(port), "-announce", "-trace"}
			if tt.versions != "" {
				argv = append(argv, "-versions", tt.versions)
			}
			proc := startServer(t, port, os.Environ(), argv...)
			rc := remoteCase{
				server:      "gosdk",
				cfg:         ServerConfig{Config: transports.Config{Type: transports.TypeHTTP, URL: proc.url("/mcp")}},
				proc:        proc,
				wantVersion: tt.wantVersion,
				wantInfo:    "gosdkserver",
				wantTools:   []string{"echo", "add", "announce"},
				pingTool:    "echo",
				pingArgs:    `{"text":"ping"}`,
				call:        goCall,
				resourceURI: "sdk://greeting",
				resourceHas: "hello from go-sdk",
				notify:      announceNotify,
				newSession:  !tt.listen,
			}
			if tt.listen {
				rc.listenTrace = "gosdkserver: received subscriptions/listen"
			}
			rc.exercise(t)
		})
	}
}

func TestRemoteInteropMCPGo(t *testing.T) {
	bin := buildNested(t, "mcpgoserver")
	tests := []struct {
		name        string
		args        []string // -transport and more
		typ         transports.Type
		path        string
		pin         string // ServerConfig.ProtocolVersion
		wantVersion string
		listen      bool
		newSession  bool
		lost        string
	}{
		// mcp-go answers server/discover on its legacy SSE transport too,
		// so the session runs in the stateless era over HTTP+SSE: requests
		// are POSTed to the endpoint, and the answers, the listen
		// acknowledgement and list_changed come on the GET /sse stream.
		// Killing the server ends that stream: the actor reconnects.
		{"sse", []string{"-transport", "sse"}, transports.TypeSSE, "/sse", "",
			protocol.Version20260728, true, true, ""},
		// Streamable HTTP in the stateless era, as the go-sdk's.
		{"http", []string{"-transport", "http"}, transports.TypeHTTP, "/mcp", "",
			protocol.Version20260728, true, false, ""},
		// Streamable HTTP pinned to the session era, with session ids the
		// server checks: the restarted server answers the old one with 404.
		{"http session era", []string{"-transport", "http", "-stateful"}, transports.TypeHTTP, "/mcp", protocol.Version20251125,
			protocol.Version20251125, false, true, ""},
		// The same with mcp-go's default session ids, which it issues but
		// never checks: the restarted server takes the old id, so the
		// session lives on and calls succeed, but the server never saw
		// that session's initialize, and mcp-go sends list_changed only to
		// initialized sessions.
		{"http session era, unchecked ids", []string{"-transport", "http"}, transports.TypeHTTP, "/mcp", protocol.Version20251125,
			protocol.Version20251125, false, false,
			"mcp-go's default session id manager accepts the old session id, but its notifications go only to sessions initialized in this process"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := freePort(t)
			argv := append([]string{bin, "-addr", "127.0.0.1:" + strconv.Itoa(port), "-trace"}, tt.args...)
			proc := startServer(t, port, os.Environ(), argv...)
			rc := remoteCase{
				server:           "mcpgo",
				cfg:              ServerConfig{Config: transports.Config{Type: tt.typ, URL: proc.url(tt.path)}, ProtocolVersion: tt.pin},
				proc:             proc,
				wantVersion:      tt.wantVersion,
				wantInfo:         "mcpgoserver",
				wantTools:        []string{"echo", "add", "announce"},
				pingTool:         "echo",
				pingArgs:         `{"text":"ping"}`,
				call:             goCall,
				resourceURI:      "mcpgo://greeting",
				resourceHas:      "hello from mcp-go",
				notify:           announceNotify,
				newSession:       tt.newSession,
				lostAfterRestart: tt.lost,
			}
			if tt.listen {
				rc.listenTrace = "mcpgoserver: received subscriptions/listen"
			}
			rc.exercise(t)
		})
	}
}

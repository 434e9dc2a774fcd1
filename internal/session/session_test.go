package session_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio"
	"github.com/mcpvisor/mcpvisor/transports/stdio/reaper"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

func TestMain(m *testing.M) {
	reaper.HelperMain()
	if mockserver.IsRequested() {
		os.Exit(mockserver.Main(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// recordingConn remembers the methods of the frames sent through it.
type recordingConn struct {
	transports.Conn
	mu      sync.Mutex
	methods []string
	params  []json.RawMessage // of each request in methods
}

func (c *recordingConn) Send(ctx context.Context, frame []byte) error {
	if m, err := protocol.Decode(frame); err == nil && m.Method != "" {
		c.mu.Lock()
		c.methods = append(c.methods, m.Method)
		c.params = append(c.params, append(json.RawMessage(nil), m.Params...))
		c.mu.Unlock()
	}
	return c.Conn.Send(ctx, frame)
}

// sentParams returns the params of every request of method sent so far.
func (c *recordingConn) sentParams(method string) []json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []json.RawMessage
	for i, m := range c.methods {
		if m == method {
			out = append(out, c.params[i])
		}
	}
	return out
}

func (c *recordingConn) sent() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.methods...)
}

type fixture struct {
	s    *session.Session
	conn *recordingConn
	pid  int
}

var fastClose = stdio.Options{CloseStdinTimeout: 500 * time.Millisecond, TerminateTimeout: 500 * time.Millisecond}

func open(t *testing.T, opts session.Options, sopts stdio.Options, args ...string) (*fixture, error) {
	t.Helper()
	f := &fixture{}
	dial := func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
		c, err := stdio.Dial(ctx, mockserver.Command(args...), sopts, r)
		if err != nil {
			return nil, err
		}
		f.pid = c.Pid()
		f.conn = &recordingConn{Conn: c}
		return f.conn, nil
	}
	if opts.ClientInfo.Name == "" {
		opts.ClientInfo = protocol.Implementation{Name: "mcpvisor-test", Version: "0"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := session.Open(ctx, dial, opts)
	f.s = s
	// Cleanups run last-registered first: close, then check the group.
	if f.pid != 0 {
		t.Cleanup(func() {
			assert.Empty(t, stdiotest.WaitGroupGone(f.pid, 3*time.Second), "the server's process group must be gone")
		})
	}
	if s != nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.Close(ctx, nil)
		})
	}
	return f, err
}

func mustOpen(t *testing.T, opts session.Options, args ...string) *fixture {
	t.Helper()
	f, err := open(t, opts, fastClose, args...)
	require.NoError(t, err)
	return f
}

func TestNegotiation(t *testing.T) {
	tests := []struct {
		name         string
		opts         session.Options
		args         []string
		wantVersion  string
		wantRejected bool
		wantSent     []string // the first methods sent
	}{
		{"stateless server", session.Options{}, nil, protocol.Version20260728, false,
			[]string{"server/discover", "tools/list"}},
		{"handshake-era server rejects discover", session.Options{}, []string{"-versions", "2025-06-18,2024-11-05"}, protocol.Version20250618, true,
			[]string{"server/discover", "initialize", "notifications/initialized", "tools/list"}},
		{"pinned handshake version sends no discover", session.Options{ProtocolVersion: protocol.Version20251125}, nil, protocol.Version20251125, false,
			[]string{"initialize", "notifications/initialized", "tools/list"}},
		{"pinned stateless version", session.Options{ProtocolVersion: protocol.Version20260728}, nil, protocol.Version20260728, false,
			[]string{"server/discover", "tools/list"}},
		{"oldest era", session.Options{}, []string{"-versions", "2024-11-05"}, protocol.Version20241105, true,
			[]string{"server/discover", "initialize", "notifications/initialized", "tools/list"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustOpen(t, tt.opts, tt.args...)
			assert.Equal(t, tt.wantVersion, f.s.Peer().Version)
			assert.Equal(t, tt.wantRejected, f.s.Peer().DiscoverRejected)
			assert.Equal(t, "mockserver", f.s.Peer().Info.Name)
			tools, err := f.s.Lists().Tools(testwait.Context(t))
			require.NoError(t, err, "requests after negotiation must carry what the era needs")
			assert.Len(t, tools, 5)
			assert.Equal(t, tt.wantSent, f.conn.sent())
		})
	}
}

func TestServerThatRejectedDiscoverIsNeverAskedAgain(t *testing.T) {
	var memory session.Memory
	first := mustOpen(t, session.Options{Memory: &memory}, "-versions", "2025-11-25")
	assert.Equal(t, []string{"server/discover", "initialize", "notifications/initialized"}, first.conn.sent())
	assert.True(t, memory.DiscoverRejected())

	second := mustOpen(t, session.Options{Memory: &memory}, "-versions", "2025-11-25")
	assert.Equal(t, protocol.Version20251125, second.s.Peer().Version)
	assert.Equal(t, []string{"initialize", "notifications/initialized"}, second.conn.sent())

	memory.Forget()
	third := mustOpen(t, session.Options{Memory: &memory})
	assert.Equal(t, protocol.Version20260728, third.s.Peer().Version, "a forgotten server is probed again")
}

func TestPinnedVersionTheServerLacksFails(t *testing.T) {
	_, err := open(t, session.Options{ProtocolVersion: protocol.Version20260728}, fastClose, "-versions", "2025-11-25")
	assert.ErrorIs(t, err, session.ErrVersionMismatch)
	_, err = open(t, session.Options{ProtocolVersion: "1999-01-01"}, fastClose)
	assert.ErrorIs(t, err, session.ErrVersionMismatch)
}

func TestSilentServerFailsConnectByItsDeadline(t *testing.T) {
	f := &fixture{}
	dial := func(ctx context.Context, r transports.Receiver) (transports.Conn, error) {
		c, err := stdio.Dial(ctx, mockserver.Command("-silent"), fastClose, r)
		if c != nil {
			f.pid = c.Pid()
		}
		return c, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := session.Open(ctx, dial, session.Options{DiscoverTimeout: 300 * time.Millisecond})
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, session.ErrTimeout)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Empty(t, stdiotest.WaitGroupGone(f.pid, 3*time.Second), "a failed connect leaves no process")
}

func TestToolCalls(t *testing.T) {
	for _, version := range []string{protocol.Version20260728, protocol.Version20251125, protocol.Version20241105} {
		t.Run(version, func(t *testing.T) {
			f := mustOpen(t, session.Options{ProtocolVersion: version})
			ctx := testwait.Context(t)

			res, err := f.s.CallTool(ctx, "echo", json.RawMessage(`{"text":"hello"}`), nil)
			require.NoError(t, err)
			require.Len(t, res.Content, 1)
			assert.Equal(t, "hello", res.Content[0].Text)

			res, err = f.s.CallTool(ctx, "add", json.RawMessage(`{"a":2,"b":40}`), nil)
			require.NoError(t, err)
			assert.JSONEq(t, `{"sum":42}`, string(res.StructuredContent))

			res, err = f.s.CallTool(ctx, "fail", nil, nil)
			require.NoError(t, err, "a tool error is a result, not an error")
			assert.True(t, res.IsError)

			_, err = f.s.CallTool(ctx, "nope \"quoted\" \u2603", nil, nil)
			var rpcErr *protocol.Error
			require.ErrorAs(t, err, &rpcErr)
			assert.Equal(t, int64(protocol.CodeInvalidParams), rpcErr.Code)
			assert.Contains(t, rpcErr.Message, `nope \"quoted\" ☃`, "the name arrives intact")

			sent := len(f.conn.sent())
			_, err = f.s.CallTool(ctx, "echo", json.RawMessage(`{"text":`), nil)
			assert.Error(t, err, "invalid arguments are refused")
			assert.Len(t, f.conn.sent(), sent, "and never reach the server")

			res, err = f.s.CallTool(ctx, "echo", json.RawMessage(`{"text":"meta"}`), protocol.Meta{"trace": json.RawMessage(`"t1"`)})
			require.NoError(t, err, "caller _meta goes with the stateless-era members")
			assert.Equal(t, "meta", res.Content[0].Text)
		})
	}
}

func TestConcurrentCallsAreCorrelated(t *testing.T) {
	f := mustOpen(t, session.Options{}, "-latency", "2ms")
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				text := strings.Repeat("x", g) + ":" + string(rune('a'+i))
				args, _ := json.Marshal(map[string]string{"text": text})
				res, err := f.s.CallTool(testwait.Context(t), "echo", args, nil)
				if assert.NoError(t, err) {
					assert.Equal(t, text, res.Content[0].Text, "each caller gets its own answer")
				}
			}
		}()
	}
	testwait.Call(t, "every caller to get its answer", wg.Wait)
	assert.Zero(t, f.s.InFlight())
}

func TestHungCallEndsByItsDeadlineAndIsCancelled(t *testing.T) {
	f := mustOpen(t, session.Options{}, "-hang-on-call")
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := f.s.CallTool(ctx, "echo", json.RawMessage(`{"text":"x"}`), nil)
	elapsed := time.Since(start)
	var te *session.TimeoutError
	require.ErrorAs(t, err, &te)
	assert.True(t, te.Sent)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, elapsed, 2*time.Second)
	assert.Zero(t, f.s.InFlight(), "a timed-out call leaves no waiter")
	assert.Eventually(t, func() bool {
		sent := f.conn.sent()
		return sent[len(sent)-1] == protocol.NotificationCancelled
	}, 2*time.Second, 10*time.Millisecond, "the server is told the call was abandoned")

	// The session is still usable.
	_, err = f.s.Lists().Tools(testwait.Context(t))
	assert.NoError(t, err)
}

func TestCancelledContext(t *testing.T) {
	f := mustOpen(t, session.Options{}, "-hang-on-call")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := f.s.CallTool(ctx, "echo", nil, nil)
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, session.ErrTimeout)
}

func TestServerExitFailsPendingAndLaterCalls(t *testing.T) {
	f := mustOpen(t, session.Options{}, "-exit-after", "1")
	ctx := testwait.Context(t)
	_, err := f.s.CallTool(ctx, "echo", json.RawMessage(`{"text":"1"}`), nil)
	require.NoError(t, err)

	start := time.Now()
	_, err = f.s.CallTool(ctx, "echo", json.RawMessage(`{"text":"2"}`), nil)
	require.ErrorIs(t, err, session.ErrConnectionClosed)
	var pe *stdio.ProcessExitError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 3, pe.ExitCode)
	assert.Contains(t, err.Error(), "exiting after 1 calls", "the server's last words are quoted")
	assert.Less(t, time.Since(start), 3*time.Second)

	_, err = f.s.CallTool(ctx, "echo", nil, nil)
	assert.ErrorIs(t, err, session.ErrConnectionClosed, "later calls fail at once")
	testwait.Done(t, f.s.Done(), "the session to end")
}

func TestCloseFailsPendingCallsAtOnce(t *testing.T) {
	f := mustOpen(t, session.Options{}, "-hang-on-call")
	errs := make(chan error, 5)
	for range 5 {
		go func() {
			_, err := f.s.CallTool(testwait.Context(t), "echo", nil, nil)
			errs <- err
		}()
	}
	require.Eventually(t, func() bool { return f.s.InFlight() == 5 }, 5*time.Second, 5*time.Millisecond)
	go f.s.Close(context.Background(), session.ErrServerRestarting)
	for range 5 {
		select {
		case err := <-errs:
			assert.ErrorIs(t, err, session.ErrServerRestarting)
		case <-time.After(2 * time.Second):
			t.Fatal("a pending call did not fail when the session closed")
		}
	}
}

func TestGarbageOnStdoutIsSkipped(t *testing.T) {
	f := mustOpen(t, session.Options{}, "-garbage")
	for range 40 { // a malformed frame before each answer: never many in a row
		res, err := f.s.CallTool(testwait.Context(t), "echo", json.RawMessage(`{"text":"ok"}`), nil)
		require.NoError(t, err)
		assert.Equal(t, "ok", res.Content[0].Text)
	}
	st := f.s.Stats()
	assert.GreaterOrEqual(t, st.NonProtocolLines, int64(3))
	assert.GreaterOrEqual(t, st.MalformedFrames, int64(3))
}

func TestOversizeAnswerFailsItsCallAtOnce(t *testing.T) {
	f, err := open(t, session.Options{}, stdio.Options{MaxFrameSize: 1 << 20, CloseStdinTimeout: 500 * time.Millisecond}, "-oversize", "3000000")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = f.s.CallTool(ctx, "echo", nil, nil)
	var tooBig *transports.FrameTooLargeError
	require.ErrorAs(t, err, &tooBig, "the call fails with the frame error, not by its deadline")
	assert.Equal(t, int64(1<<20), tooBig.Limit)
	assert.Equal(t, int64(1), f.s.Stats().OversizeFrames)
	assert.NoError(t, f.s.Ping(testwait.Context(t)), "the connection survives")
}

// A server that answers nothing but malformed or oversize frames does not
// speak the protocol: after 32 in a row the session ends.
func TestManyBadFramesInARowEndTheSession(t *testing.T) {
	f, err := open(t, session.Options{}, stdio.Options{MaxFrameSize: 64 << 10, CloseStdinTimeout: 500 * time.Millisecond}, "-oversize", "100000")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 40 && f.s.Err() == nil; i++ {
		_, err = f.s.CallTool(ctx, "echo", nil, nil)
		require.Error(t, err)
	}
	require.ErrorIs(t, f.s.Err(), session.ErrMalformedResponse)
	assert.Contains(t, f.s.Err().Error(), "32 malformed or oversize frames in a row")
	assert.Equal(t, int64(32), f.s.Stats().OversizeFrames)
}

func TestPaginationResourcesAndPrompts(t *testing.T) {
	f := mustOpen(t, session.Options{}, "-tools", "25", "-page-size", "10", "-resources", "3", "-prompts", "2")
	ctx := testwait.Context(t)
	tools, err := f.s.Lists().Tools(ctx)
	require.NoError(t, err)
	assert.Len(t, tools, 30)
	assert.Equal(t, "tool_025", tools[29].Name)

	resources, err := f.s.Lists().Resources(ctx)
	require.NoError(t, err)
	assert.Len(t, resources, 3)
	templates, err := f.s.Lists().ResourceTemplates(ctx)
	require.NoError(t, err)
	assert.Len(t, templates, 1)
	rr, err := f.s.ReadResource(ctx, resources[0].URI)
	require.NoError(t, err)
	assert.Equal(t, "contents of mock://resource/1", rr.Contents[0].Text)
	_, err = f.s.ReadResource(ctx, "file:///etc/passwd")
	var rpcErr *protocol.Error
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, int64(protocol.CodeInvalidParams), rpcErr.Code, "SEP-2164: an unknown resource is invalid params")

	prompts, err := f.s.Lists().Prompts(ctx)
	require.NoError(t, err)
	assert.Len(t, prompts, 2)
	gp, err := f.s.GetPrompt(ctx, "prompt_1", map[string]string{"name": "ada"})
	require.NoError(t, err)
	assert.Equal(t, "prompt prompt_1 for ada", gp.Messages[0].Content.Text)
}

// The stateless era's list requests carry the session's _meta (encoded
// once) and the cursor: the same params the typed PaginatedParams encode.
func TestListRequestsCarryMetaAndCursor(t *testing.T) {
	f := mustOpen(t, session.Options{}, "-tools", "25", "-page-size", "10")
	require.Equal(t, protocol.Version20260728, f.s.Peer().Version)
	tools, err := f.s.Lists().Tools(testwait.Context(t))
	require.NoError(t, err)
	require.Len(t, tools, 30)
	sent := f.conn.sentParams(protocol.MethodToolsList)
	require.Len(t, sent, 3, "three pages")
	var first protocol.PaginatedParams
	require.NoError(t, json.Unmarshal(sent[0], &first))
	var version string
	require.True(t, first.Meta.Get(protocol.MetaProtocolVersion, &version))
	assert.Equal(t, protocol.Version20260728, version)
	assert.Empty(t, first.Cursor)
	cursors := []string{""}
	for i, raw := range sent {
		var p protocol.PaginatedParams
		require.NoError(t, json.Unmarshal(raw, &p), "page %d: %s", i, raw)
		assert.Equal(t, first.Meta, p.Meta, "page %d: the same _meta", i)
		want, err := json.Marshal(protocol.PaginatedParams{Meta: first.Meta, Cursor: p.Cursor})
		require.NoError(t, err)
		assert.JSONEq(t, string(want), string(raw), "page %d", i)
		if i > 0 {
			assert.NotEmpty(t, p.Cursor, "page %d follows a cursor", i)
			assert.NotContains(t, cursors, p.Cursor)
		}
		cursors = append(cursors, p.Cursor)
	}
}

func TestServerWithoutOptionalFeaturesListsNothingForThem(t *testing.T) {
	f := mustOpen(t, session.Options{})
	resources, err := f.s.Lists().Resources(testwait.Context(t))
	require.NoError(t, err)
	assert.Empty(t, resources)
	assert.NotContains(t, f.conn.sent(), protocol.MethodResourcesList, "no request for an undeclared capability")
}

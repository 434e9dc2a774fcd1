package mcpvisor

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/actors/admission"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Two hundred servers at once: every transport, fast and slow, healthy
// and failing, lazy and disabled. The connect scheduler admits them a few
// at a time per class and never more; when it has done, every server
// says where it stands and the pool holds exactly the tools of the ready
// ones. How close the scheduler comes to the ideal packing of the
// connects into its slots is logged (a figure, not a verdict).

// scaleLimits are the scheduler's limits in the test: small, so that
// almost every connect waits for a slot.
var scaleLimits = [admission.NumClasses]int{admission.Local: 4, admission.Remote: 8}

// scaleKind is one kind of server of the test, and what it must end up
// as.
type scaleKind struct {
	prefix string
	n      int
	cfg    func(i int) ServerConfig
	want   State // once every connect is over (lazy: before first use)
	lazy   bool
}

func TestTwoHundredMixedServersAllSettle(t *testing.T) {
	if testing.Short() {
		t.Skip("200 servers: not in -short mode")
	}
	// A few remote mock servers in this process, each serving many
	// sessions: Streamable HTTP of both eras (stateless; sessions with
	// event-stream answers), legacy HTTP+SSE, and WebSocket.
	mocks := func(n int, o mockserver.Options) []string {
		urls := make([]string, n)
		for i := range urls {
			urls[i] = serveMock(t, o).URL
		}
		return urls
	}
	stateless := mocks(4, mockserver.Options{Transport: mockserver.TransportHTTP})
	sessions := mocks(4, mockserver.Options{Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}, SSEResponses: true})
	sse := mocks(2, mockserver.Options{Transport: mockserver.TransportSSE, Versions: []string{protocol.Version20241105}})
	ws := mocks(2, mockserver.Options{Transport: mockserver.TransportWS})
	closed := closedAddr(t) // nothing listens there: connection refused

	kinds := []scaleKind{
		{prefix: "stdio-plain", n: 60, want: StateReady,
			cfg: func(i int) ServerConfig { return mock("-tools", fmt.Sprint(i%4)) }},
		{prefix: "stdio-slow", n: 40, want: StateReady,
			cfg: func(int) ServerConfig { return mock("-init-delay", "100ms") }},
		{prefix: "stdio-crash", n: 10, want: StateFailed,
			cfg: func(int) ServerConfig { return mock("-exit-at-start") }},
		{prefix: "stdio-lazy", n: 10, want: StatePending, lazy: true,
			cfg: func(int) ServerConfig { c := mock("-tools", "1"); c.Lazy = true; return c }},
		{prefix: "stdio-off", n: 2, want: StateDisabled,
			cfg: func(int) ServerConfig { c := mock(); c.Disabled = true; return c }},
		{prefix: "http-stateless", n: 24, want: StateReady,
			cfg: func(i int) ServerConfig { return remoteServer(transports.TypeHTTP, stateless[i%len(stateless)]) }},
		{prefix: "http-session", n: 24, want: StateReady,
			cfg: func(i int) ServerConfig { return remoteServer(transports.TypeHTTP, sessions[i%len(sessions)]) }},
		{prefix: "sse", n: 12, want: StateReady,
			cfg: func(i int) ServerConfig { return remoteServer(transports.TypeSSE, sse[i%len(sse)]) }},
		{prefix: "ws", n: 14, want: StateReady,
			cfg: func(i int) ServerConfig { return remoteServer(transports.TypeWS, ws[i%len(ws)]) }},
		{prefix: "refused", n: 4, want: StateFailed,
			cfg: func(i int) ServerConfig {
				return [...]ServerConfig{
					remoteServer(transports.TypeHTTP, "http://"+closed+"/mcp"),
					remoteServer(transports.TypeHTTP, "http://"+closed+"/mcp"),
					remoteServer(transports.TypeSSE, "http://"+closed+"/sse"),
					remoteServer(transports.TypeWS, "ws://"+closed+"/ws"),
				}[i%4]
			}},
	}
	servers := map[string]ServerConfig{}
	kindOf := map[string]*scaleKind{}
	healthy := 0 // servers to be ready once the connects are over
	for k := range kinds {
		kind := &kinds[k]
		for i := range kind.n {
			name := fmt.Sprintf("%s-%03d", kind.prefix, i)
			servers[name] = kind.cfg(i)
			kindOf[name] = kind
		}
		if kind.want == StateReady {
			healthy += kind.n
		}
	}
	require.Len(t, servers, 200)

	opts := testOptions
	opts.LocalConnectLimit, opts.RemoteConnectLimit = scaleLimits[admission.Local], scaleLimits[admission.Remote]
	// A failing server is tried twice more, about 10 then 20 ms later, then
	// parked: its retries go through the scheduler like any connect.
	opts.Reconnect = ReconnectPolicy{MaxAttempts: 2, InitialDelay: Duration(10 * time.Millisecond), MaxDelay: Duration(50 * time.Millisecond)}
	s := start(t, opts)
	events := s.reg.subscribeRecords(t.Context(), false, 0, 1<<14)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	began := time.Now()
	res, err := s.SetServers(ctx, servers)
	require.NoError(t, err)
	assert.Empty(t, res.Errors)
	assert.Len(t, res.Added, 200)
	require.NoError(t, s.WaitSettled(ctx))
	settled := time.Since(began)
	// WaitSettled counts a server waiting out its backoff delay as
	// settled: the failing servers may still have attempts to make. What
	// the states were at that moment is logged, not asserted (a retry can
	// make a server pending again at any time).
	t.Logf("WaitSettled returned after %v; states then: %v", settled, countStates(s.Status()))

	// Every server that connects at all ends in ready or parked. The
	// events say when, and how long each connect attempt held its slot.
	tl := followToTheEnd(t, events, began, servers, kindOf)

	// The scheduler: never more than the limit at once, and the limit is
	// used.
	stats, err := s.reg.admissionStats(ctx)
	require.NoError(t, err)
	assert.Equal(t, scaleLimits[:], stats.Limit[:])
	assert.Equal(t, scaleLimits[admission.Local], stats.Peak[admission.Local], "never more local connects at once than the limit, and the limit is reached")
	assert.Equal(t, scaleLimits[admission.Remote], stats.Peak[admission.Remote], "never more remote connects at once than the limit, and the limit is reached")
	assert.Zero(t, stats.Running[admission.Local]+stats.Running[admission.Remote])
	assert.Zero(t, stats.Queued[admission.Local]+stats.Queued[admission.Remote])

	// Every server is listed, in the state its kind calls for (and
	// WaitSettled agrees that nothing is left to do).
	require.NoError(t, s.WaitSettled(ctx))
	poolTools := map[string]int{}
	for _, tool := range s.Tools() {
		poolTools[tool.Server]++
	}
	statuses := s.Status()
	require.Len(t, statuses, 200, "every configured server has a status")
	for _, st := range statuses {
		kind := kindOf[st.Name]
		require.NotNil(t, kind, "a status for an unknown server %q", st.Name)
		assert.Equal(t, kind.want, st.State, "%s: %s", st.Name, st.LastError)
		cfg := servers[st.Name]
		assert.Equal(t, string(cfg.Kind()), st.Transport, st.Name)
		assert.Equal(t, kind.lazy, st.Lazy, st.Name)
		switch kind.want {
		case StateReady:
			assert.Empty(t, st.LastError, st.Name)
			assert.Positive(t, st.ToolCount, st.Name)
			assert.Equal(t, st.ToolCount, poolTools[st.Name], "%s: every tool of a ready server is in the pool", st.Name)
			assert.True(t, hasTool(s, QualifiedName(st.Name, "echo")), st.Name)
		case StateFailed:
			assert.NotEmpty(t, st.LastError, "%s: a parked server says why", st.Name)
			assert.Contains(t, st.LastError, "gave up after 2 reconnect attempts", st.Name)
			assert.Equal(t, 2, st.Attempt, st.Name)
			assert.Zero(t, poolTools[st.Name], "%s: a failed server offers nothing", st.Name)
		default: // disabled, and lazy servers before their first use
			assert.Empty(t, st.LastError, st.Name)
			assert.Zero(t, poolTools[st.Name], "%s: offers nothing", st.Name)
		}
		if kind.prefix == "refused" {
			assert.Equal(t, "refused", st.LastErrorClass, st.Name)
		}
		if kind.prefix == "stdio-crash" {
			assert.Equal(t, FailureClosed, st.LastFailure, st.Name)
		}
	}
	assert.Len(t, poolTools, healthy, "only ready servers offer tools")

	// A lazy server connects on its first use, and only it.
	lazy := func(i int) string { return fmt.Sprintf("stdio-lazy-%03d", i) }
	require.NoError(t, s.Server(lazy(0)).Ping(ctx))
	assert.Equal(t, StateReady, statusOf(s, lazy(0)).State)
	for i := 1; i < 10; i++ {
		assert.Equal(t, StatePending, statusOf(s, lazy(i)).State, "a lazy server nobody used stays pending")
	}
	// The rest all at once: through the same scheduler.
	var wg sync.WaitGroup
	for i := 1; i < 10; i++ {
		wg.Go(func() { assert.NoError(t, s.Server(lazy(i)).Ping(ctx)) })
	}
	testwait.Call(t, "the lazy servers' pings", wg.Wait)
	for i := range 10 {
		assert.Equal(t, StateReady, statusOf(s, lazy(i)).State, lazy(i))
		require.Eventually(t, func() bool { return hasTool(s, QualifiedName(lazy(i), "tool_001")) }, 10*time.Second, 5*time.Millisecond,
			"%s: the tools of a woken lazy server join the pool", lazy(i))
	}
	stats, err = s.reg.admissionStats(ctx)
	require.NoError(t, err)
	assert.Equal(t, scaleLimits[admission.Local], stats.Peak[admission.Local], "nine lazy servers woken at once wait for a slot like any other")

	tl.log(t, settled)
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func countStates(sts []ServerStatus) map[State]int {
	n := map[State]int{}
	for _, st := range sts {
		n[st.State]++
	}
	return n
}

// scaleTimeline is what the events of the test say about the scheduler:
// per class, how long each connect attempt held its slot, and when the
// last one ended.
type scaleTimeline struct {
	began    time.Time
	final    time.Time                             // when the last server reached its final state
	attempts [admission.NumClasses][]time.Duration // connecting → the next state, each attempt
	lastEnd  [admission.NumClasses]time.Time       // when the class's last attempt ended
	byKind   map[string][]time.Duration            // the same attempts, by kind of server
	kinds    map[string]admission.Class            // the class of each kind
	states   map[State]int                         // the final states
}

// followToTheEnd reads events until every server that is to connect at
// start (neither lazy nor disabled) has reached ready or a parked state,
// and returns the timeline. The subscription's buffer holds every event
// of the test: a gap fails it.
func followToTheEnd(t *testing.T, events <-chan eventRecord, began time.Time, servers map[string]ServerConfig, kindOf map[string]*scaleKind) *scaleTimeline {
	t.Helper()
	tl := &scaleTimeline{began: began, byKind: map[string][]time.Duration{}, kinds: map[string]admission.Class{}, states: map[State]int{}}
	awaited := map[string]bool{}
	for name, cfg := range servers {
		if !cfg.Lazy && !cfg.Disabled {
			awaited[name] = true
		}
	}
	connecting := map[string]time.Time{}
	deadline := time.After(60 * time.Second)
	for len(awaited) > 0 {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "the subscription ended early")
			require.NotEqual(t, EventGap, ev.Type, "the buffer holds every event of the test")
			if ev.Type != EventServerState {
				continue
			}
			if ev.State == StateConnecting {
				connecting[ev.Server] = ev.Time
				continue
			}
			kind := kindOf[ev.Server]
			if at, ok := connecting[ev.Server]; ok {
				delete(connecting, ev.Server)
				c := classOf(servers[ev.Server])
				d := ev.Time.Sub(at)
				tl.attempts[c] = append(tl.attempts[c], d)
				tl.byKind[kind.prefix] = append(tl.byKind[kind.prefix], d)
				tl.kinds[kind.prefix] = c
				if ev.Time.After(tl.lastEnd[c]) {
					tl.lastEnd[c] = ev.Time
				}
			}
			if awaited[ev.Server] && (ev.State == StateReady || ev.State.Parked()) {
				delete(awaited, ev.Server)
				tl.states[ev.State]++
				if ev.Time.After(tl.final) {
					tl.final = ev.Time
				}
			}
		case <-deadline:
			left := slices.Sorted(func(yield func(string) bool) {
				for name := range awaited {
					if !yield(name) {
						return
					}
				}
			})
			t.Fatalf("%d servers never reached ready or failed: %v", len(left), left)
		}
	}
	return tl
}

// log reports, per class, the ideal time of the scheduler against the
// measured one. The ideal packs the class's connect attempts, at their
// mean measured duration, into its slots with no slot ever idle:
// ceil(attempts / limit) × mean attempt. The measured time runs from
// SetServers to the end of the class's last attempt, so it also counts
// the backoff delays of the failing servers, during which a slot may have
// nothing to do.
func (tl *scaleTimeline) log(t *testing.T, settled time.Duration) {
	t.Helper()
	for c := range admission.NumClasses {
		as := tl.attempts[c]
		if len(as) == 0 {
			continue
		}
		var sum time.Duration
		for _, d := range as {
			sum += d
		}
		mean := sum / time.Duration(len(as))
		rounds := (len(as) + scaleLimits[c] - 1) / scaleLimits[c]
		ideal := time.Duration(rounds) * mean
		measured := tl.lastEnd[c].Sub(tl.began)
		t.Logf("%-6s: %3d connect attempts, mean %6.1f ms, limit %d: ideal ceil(%d/%d)×%.1f ms = %v, measured %v, ratio %.2f",
			c, len(as), millis(mean), scaleLimits[c], len(as), scaleLimits[c], millis(mean), ideal.Round(time.Millisecond),
			measured.Round(time.Millisecond), float64(measured)/float64(ideal))
	}
	kinds := make([]string, 0, len(tl.byKind))
	for k := range tl.byKind {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		as := slices.Clone(tl.byKind[k])
		slices.Sort(as)
		t.Logf("  %-14s (%s): %3d attempts, median %6.1f ms, max %6.1f ms", k, tl.kinds[k], len(as), millis(as[len(as)/2]), millis(as[len(as)-1]))
	}
	t.Logf("all 200 settled: WaitSettled after %v, every server in its final state (%v) after %v",
		settled.Round(time.Millisecond), tl.states, tl.final.Sub(tl.began).Round(time.Millisecond))
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

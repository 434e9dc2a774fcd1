package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

// BenchmarkRecovery measures supervision recovery: each op kills a ready
// server while recoveryInFlight calls to it are in flight, and measures
//
//   - death→failed: from the kill until the last of those calls has
//     returned its error (a call must never outlive its connection);
//   - death→ready: from the kill until the server is ready again on a new
//     connection (ServerStatus.ConnectedSince, stamped by the server actor
//     when it installs the session, so polling adds nothing to it).
//
// Over stdio the kill is SIGKILL to the server process; the supervisor
// starts a new one. Over Streamable HTTP (session era) it is an abrupt
// close of the in-process server (listener and every connection, as a
// dying process), and a new server listens on the same address at once:
// death→ready is then the supervisor's own delay, not the server's.
//
// ns/op covers each kill until both figures are known; the preparation of
// each op (waiting for the previous episode to end, starting the calls)
// is excluded. The calls hang (HangOnCall), so only the death ends them.
func BenchmarkRecovery(b *testing.B) {
	b.Run("transport=stdio", func(b *testing.B) {
		s := startForBench(b, recoveryOptions())
		settleForBench(b, s, map[string]ServerConfig{"victim": mock("-hang-on-call")})
		// Nothing to count server-side: the calls are in the process's
		// stdin once they are pending.
		runRecovery(b, s, func() int { return recoveryInFlight }, func() {
			pid := pidOf(s, "victim")
			require.NotZero(b, pid, "the victim has no process")
			require.NoError(b, killPID(pid))
		})
	})
	b.Run("transport=http", func(b *testing.B) {
		srv := newRestartableMock(b, mockserver.Options{
			Transport: mockserver.TransportHTTP, Versions: []string{protocol.Version20251125}, HangOnCall: true,
		})
		s := startForBench(b, recoveryOptions())
		settleForBench(b, s, map[string]ServerConfig{"victim": remoteServer(transports.TypeHTTP, srv.url)})
		runRecovery(b, s, func() int { return int(srv.posts.Load()) }, srv.restart)
	})
}

// recoveryInFlight is how many calls are in flight at each death.
const recoveryInFlight = 4

// recoveryOptions are testOptions with the benchmark's reconnect policy:
// backoff from 50 ms up to 500 ms. A stdio process exit is reconnected at
// once; an HTTP reconnect after a transient failure waits one backoff
// delay first (that asymmetry is by design: see afterFailure). The budget
// (20 attempts) is generous so that the server never parks, and
// StableAfter is short so that every op starts a fresh episode: each op
// measures a first death, not the n-th death of a flapping server, whose
// reconnects wait ever longer backoff delays.
func recoveryOptions() Options {
	opts := testOptions
	opts.Reconnect = ReconnectPolicy{
		InitialDelay: Duration(50 * time.Millisecond),
		MaxDelay:     Duration(500 * time.Millisecond),
		MaxAttempts:  20,
		StableAfter:  Duration(10 * time.Millisecond),
	}
	return opts
}

// recoveryWait bounds each wait of the benchmark, so that a supervisor
// that does not recover fails the benchmark instead of hanging it.
const recoveryWait = 30 * time.Second

// runRecovery runs b.N kill-and-recover ops on server "victim" of s and
// reports the percentiles. arrived returns how many of the calls the
// server has received and holds; kill kills the server (and, for HTTP,
// brings up its replacement).
func runRecovery(b *testing.B, s *Supervisor, arrived func() int, kill func()) {
	const name = "victim"
	failed := make([]time.Duration, 0, b.N)
	ready := make([]time.Duration, 0, b.N)
	kinds := map[string]int{}       // how the in-flight calls failed
	examples := map[string]string{} // the first error of each kind
	b.ResetTimer()
	b.StopTimer()
	for range b.N {
		// A fresh episode, a ready server, calls in flight.
		pollForBench(b, "the reconnect episode to end", func() bool {
			st := statusOf(s, name)
			return st.State == StateReady && st.Attempt == 0
		}, func() string { return fmt.Sprintf("%+v", statusOf(s, name)) })
		ends, died := killWithCallsInFlight(b, s, name, arrived, kill)
		var last time.Time
		for _, end := range ends {
			kind := describeCallEnd(end.err)
			if kinds[kind]++; kinds[kind] == 1 {
				examples[kind] = end.err.Error()
			}
			if end.at.After(last) {
				last = end.at
			}
		}
		var st ServerStatus
		pollForBench(b, "the server to be ready again", func() bool {
			st = statusOf(s, name)
			return st.State == StateReady && st.ConnectedSince.After(died)
		}, func() string { return fmt.Sprintf("%+v", statusOf(s, name)) })
		b.StopTimer()

		failed = append(failed, last.Sub(died))
		ready = append(ready, st.ConnectedSince.Sub(died))
	}
	reportPercentiles(b, "death-to-failed", failed)
	reportPercentiles(b, "death-to-ready", ready)
	b.Logf("N=%d: in-flight calls ended with %v", b.N, kinds)
	for kind, example := range examples {
		b.Logf("  %s, e.g. %q", kind, example)
	}
}

// killWithCallsInFlight starts recoveryInFlight calls to server name,
// waits until they are in flight, starts the timer and kills the server.
// It returns how each call ended and when the server died.
func killWithCallsInFlight(b *testing.B, s *Supervisor, name string, arrived func() int, kill func()) ([]callEnd, time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), recoveryWait)
	defer cancel() // should b fail meanwhile, the calls end with it
	ended := make(chan callEnd, recoveryInFlight)
	for range recoveryInFlight {
		go func() {
			_, err := s.CallTool(ctx, "mcp__"+name+"__echo", json.RawMessage(`{"text":"doomed"}`))
			ended <- callEnd{at: time.Now(), err: err}
		}()
	}
	pollForBench(b, "the calls to be in flight", func() bool {
		return statusOf(s, name).InFlight == recoveryInFlight && arrived() >= recoveryInFlight
	}, func() string { return fmt.Sprintf("in flight %d, arrived %d", statusOf(s, name).InFlight, arrived()) })

	b.StartTimer()
	died := time.Now()
	kill()
	ends := make([]callEnd, 0, recoveryInFlight)
	for range recoveryInFlight {
		end := <-ended // at the latest when ctx ends
		if end.err == nil {
			b.Fatal("a call to a dead server succeeded")
		}
		ends = append(ends, end)
	}
	return ends, died
}

// callEnd is how and when one in-flight call returned.
type callEnd struct {
	at  time.Time
	err error
}

// describeCallEnd names how a call failed: typed as a lost connection
// (and which sentinel it matches), or else by its failure kind.
func describeCallEnd(err error) string {
	var lost *ConnectionLostError
	switch {
	case errors.As(err, &lost) && errors.Is(err, session.ErrConnectionClosed):
		return "ConnectionLostError/ErrConnectionClosed"
	case errors.As(err, &lost):
		return "ConnectionLostError/ErrServerRestarting"
	}
	return "untyped/" + string(ClassifyFailure(err))
}

// reportPercentiles reports the p50 and p99 of ds in milliseconds
// (nearest rank).
func reportPercentiles(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	rank := func(p int) time.Duration {
		i := (p*len(sorted)+99)/100 - 1
		return sorted[min(max(i, 0), len(sorted)-1)]
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(rank(50)), name+"-p50-ms")
	b.ReportMetric(ms(rank(99)), name+"-p99-ms")
}

// pollForBench polls cond every 200 µs until it holds, or fails b after
// recoveryWait, saying what it waited for and where things stand.
func pollForBench(b *testing.B, what string, cond func() bool, state func() string) {
	b.Helper()
	deadline := time.Now().Add(recoveryWait)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("gave up waiting %v for %s: %s", recoveryWait, what, state())
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// startForBench is start for benchmarks: a Supervisor closed at the end of
// the benchmark, checking that no server process survives.
func startForBench(b *testing.B, opts Options) *Supervisor {
	b.Helper()
	s, err := Start(context.Background(), opts)
	require.NoError(b, err)
	b.Cleanup(func() {
		pids := serverPids(s)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(b, s.Close(ctx))
		for _, pid := range pids {
			require.Empty(b, stdiotest.WaitGroupGone(pid, 3*time.Second), "process group %d must be gone after Close", pid)
		}
	})
	return s
}

// settleForBench is setAndSettle for benchmarks; every server must end
// up ready.
func settleForBench(b *testing.B, s *Supervisor, servers map[string]ServerConfig) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), recoveryWait)
	defer cancel()
	_, err := s.SetServers(ctx, servers)
	require.NoError(b, err)
	require.NoError(b, s.WaitSettled(ctx))
	for name := range servers {
		st := statusOf(s, name)
		require.Equal(b, StateReady, st.State, "%s: %s", name, st.LastError)
	}
}

// restartableMock is an HTTP mock server in this process that can die
// abruptly and be replaced by a new one (a new handler: no sessions) on
// the same address, as a server process that crashes and is restarted.
// It counts the POSTs it is serving.
type restartableMock struct {
	b     *testing.B
	o     mockserver.Options
	addr  string
	url   string
	posts atomic.Int32 // POSTs being served
	srv   *http.Server // the live server; owned by the benchmark goroutine
}

func newRestartableMock(b *testing.B, o mockserver.Options) *restartableMock {
	b.Helper()
	ln, err := net.Listen("tcp", mockserver.DefaultListen)
	require.NoError(b, err)
	m := &restartableMock{b: b, o: o, addr: ln.Addr().String()}
	m.url = "http://" + m.addr + "/mcp"
	m.serve(ln)
	b.Cleanup(func() { _ = m.srv.Close() })
	return m
}

// serve serves a new mock handler on ln.
func (m *restartableMock) serve(ln net.Listener) {
	h, err := mockserver.NewHandler(m.o)
	require.NoError(m.b, err)
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			m.posts.Add(1)
			defer m.posts.Add(-1)
		}
		h.ServeHTTP(w, r)
	})
	m.srv = &http.Server{Handler: counted, ReadHeaderTimeout: 10 * time.Second}
	go m.srv.Serve(ln)
}

// restart kills the server (its listener and every connection close at
// once, with no answer) and starts its replacement on the same address.
func (m *restartableMock) restart() {
	_ = m.srv.Close()
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; {
		if ln, err = net.Listen("tcp", m.addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond) // the port is still being released
	}
	require.NoError(m.b, err, "listening again on %s", m.addr)
	m.serve(ln)
}

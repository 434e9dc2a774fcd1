package peers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/httpclient"

	"github.com/mcpvisor/mcpvisor/bench/peers/harness"
)

// idleSessions is how many sessions BenchmarkIdleSessionMemory opens per
// client. Each holds a connection (two with a standalone GET stream) in
// this process and in the mock server's: with the sockets of the closing
// ones, a few thousand descriptors per process (RLIMIT_NOFILE here:
// 20000; Go raises the soft limit to the hard one at start).
const idleSessions = 1000

// Limits of opening and closing many sessions.
const (
	idleWorkers     = 20 // sessions opened (closed) at once: a Supervisor's remote connect limit
	idleOpenTimeout = 2 * time.Minute

	// sharedClientConns caps mcpvisor-session-sharedclient's connections
	// (and its idle ones: httpclient uses one number for both).
	sharedClientConns = 4 * idleSessions
)

// idleClient is one way a host holds many sessions to one server.
type idleClient struct {
	name string
	// start prepares what a host pays once, whatever the number of
	// sessions (a Supervisor), before the baseline is measured.
	start func(ctx context.Context, url string) (idleHost, error)
}

// idleHost holds the idle sessions of one client.
type idleHost interface {
	// open opens n sessions in the session era (2025-11-25) and checks
	// that each negotiated it.
	open(ctx context.Context, n int) error
	// close ends every session and what start prepared.
	close() error
}

// idleClients are the clients BenchmarkIdleSessionMemory measures: each
// library's default way of connecting (a standalone GET stream for
// mcpvisor and go-sdk, none for mcp-go, which opens one only with
// WithContinuousListening: mcpgo-listen), and for mcpvisor both the
// realistic use, N servers in one Supervisor, and the sessions alone.
var idleClients = []idleClient{
	{"mcpvisor", startSupervisorHost},
	{"mcpvisor-session", sessionsOf(func(ctx context.Context, url string) (harness.Session, error) {
		return connectMcpvisorSession(ctx, url, harness.EraLegacy, nil)
	}, nil)},
	{"mcpvisor-session-sharedclient", startSharedClientSessions},
	{"gosdk", sessionsOf(func(ctx context.Context, url string) (harness.Session, error) {
		return harness.ConnectGoSDKHTTP(ctx, url, harness.EraLegacy)
	}, harness.PeerHTTPClient)},
	{"mcpgo", sessionsOf(func(ctx context.Context, url string) (harness.Session, error) {
		return harness.ConnectMcpGoHTTP(ctx, url, harness.EraLegacy)
	}, harness.PeerHTTPClient)},
	{"mcpgo-listen", sessionsOf(func(ctx context.Context, url string) (harness.Session, error) {
		return harness.ConnectMcpGoHTTPWith(ctx, url, harness.EraLegacy, mcpgotransport.WithContinuousListening())
	}, harness.PeerHTTPClient)},
}

// BenchmarkIdleSessionMemory measures what idle sessions cost the client:
// one op opens idleSessions sessions to one mock server process (session
// era: each holds a session id and, where the client opens one, a
// standalone GET stream), lets them settle, measures and closes them.
// Reported per session: the growth of the heap (HeapAlloc: live objects;
// HeapInuse: the spans holding them) and of the goroutine stacks
// (StackInuse), and the goroutines added. Baselines are taken after a GC
// with the host's one-time state in place (for mcpvisor, a started
// Supervisor). ns/op is the time to open and close them all, GCs included.
func BenchmarkIdleSessionMemory(b *testing.B) {
	for _, c := range idleClients {
		b.Run("client="+c.name+"/era="+harness.EraLegacy, func(b *testing.B) {
			srv := startHTTPMock(b)
			var sum memDelta
			for range b.N {
				d, err := measureIdle(c, srv.URL, idleSessions)
				if err != nil {
					b.Fatal(err)
				}
				sum = sum.add(d)
			}
			n := float64(b.N) * idleSessions
			b.ReportMetric(float64(sum.heapAlloc)/n, "heap-B/session")
			b.ReportMetric(float64(sum.heapInuse)/n, "heapinuse-B/session")
			b.ReportMetric(float64(sum.stack)/n, "stack-B/session")
			b.ReportMetric(float64(sum.goroutines)/n, "goroutines/session")
		})
	}
}

// memDelta is the growth of the process between two snapshots.
type memDelta struct {
	heapAlloc, heapInuse, stack int64
	goroutines                  int64
}

func (d memDelta) add(e memDelta) memDelta {
	return memDelta{d.heapAlloc + e.heapAlloc, d.heapInuse + e.heapInuse, d.stack + e.stack, d.goroutines + e.goroutines}
}

type memSnapshot struct {
	heapAlloc, heapInuse, stack uint64
	goroutines                  int
}

// snapshot waits until the number of goroutines is steady (connections
// being opened or closed in the background), collects garbage and reads
// the memory statistics.
func snapshot() memSnapshot {
	settleGoroutines(5 * time.Second)
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSnapshot{ms.HeapAlloc, ms.HeapInuse, ms.StackInuse, runtime.NumGoroutine()}
}

func (s memSnapshot) since(before memSnapshot) memDelta {
	return memDelta{
		heapAlloc:  int64(s.heapAlloc) - int64(before.heapAlloc),
		heapInuse:  int64(s.heapInuse) - int64(before.heapInuse),
		stack:      int64(s.stack) - int64(before.stack),
		goroutines: int64(s.goroutines - before.goroutines),
	}
}

// settleGoroutines returns once runtime.NumGoroutine has not changed for
// 150 ms, or after max.
func settleGoroutines(max time.Duration) {
	deadline := time.Now().Add(max)
	last, steady := runtime.NumGoroutine(), 0
	for steady < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		n := runtime.NumGoroutine()
		if n == last {
			steady++
		} else {
			last, steady = n, 0
		}
	}
}

// measureIdle opens n sessions of c to url and returns what they added.
func measureIdle(c idleClient, url string, n int) (memDelta, error) {
	ctx, cancel := context.WithTimeout(context.Background(), idleOpenTimeout)
	defer cancel()
	h, err := c.start(ctx, url)
	if err != nil {
		return memDelta{}, err
	}
	before := snapshot()
	if err := h.open(ctx, n); err != nil {
		return memDelta{}, errors.Join(err, h.close())
	}
	after := snapshot()
	runtime.KeepAlive(h)
	return after.since(before), h.close()
}

// --- n sessions of one client ---

// sessionsHost holds sessions opened one by one (idleWorkers at a time)
// by connect.
type sessionsHost struct {
	url      string
	connect  func(ctx context.Context, url string) (harness.Session, error)
	client   *http.Client // the client the sessions share, if any: its idle connections are closed last
	sessions []harness.Session
}

func sessionsOf(connect func(ctx context.Context, url string) (harness.Session, error), shared *http.Client) func(context.Context, string) (idleHost, error) {
	return func(_ context.Context, url string) (idleHost, error) {
		return &sessionsHost{url: url, connect: connect, client: shared}, nil
	}
}

// startSharedClientSessions is mcpvisor-session with one HTTP client
// (built as a Supervisor builds each server's) shared by every session,
// as the other libraries share theirs. Its connections per host are not
// capped at httpclient's default of 64: every standalone GET stream holds
// one, so a shared client with the cap would let the 65th session's
// requests wait forever.
func startSharedClientSessions(_ context.Context, url string) (idleHost, error) {
	client, err := httpclient.New(transports.Config{Type: transports.TypeHTTP, URL: url}, httpclient.Options{MaxConnsPerHost: sharedClientConns})
	if err != nil {
		return nil, err
	}
	connect := func(ctx context.Context, url string) (harness.Session, error) {
		return connectMcpvisorSession(ctx, url, harness.EraLegacy, client)
	}
	return &sessionsHost{url: url, connect: connect, client: client}, nil
}

func (h *sessionsHost) open(ctx context.Context, n int) error {
	h.sessions = make([]harness.Session, n)
	return harness.Parallel(n, idleWorkers, func(i int) error {
		s, err := h.connect(ctx, h.url)
		if err != nil {
			return err
		}
		h.sessions[i] = s
		if got := s.Version(); got != harness.EraLegacy {
			return fmt.Errorf("negotiated %q, want %q", got, harness.EraLegacy)
		}
		return nil
	})
}

func (h *sessionsHost) close() error {
	err := harness.Parallel(len(h.sessions), idleWorkers, func(i int) error {
		if s := h.sessions[i]; s != nil {
			return s.Close()
		}
		return nil
	})
	h.sessions = nil
	if h.client != nil {
		h.client.CloseIdleConnections()
	}
	return err
}

// --- n servers in one Supervisor ---

// supervisorHost is the way a host uses mcpvisor: one Supervisor, one
// server entry per session.
type supervisorHost struct {
	sup *mcpvisor.Supervisor
	url string
}

func startSupervisorHost(ctx context.Context, url string) (idleHost, error) {
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	if err != nil {
		return nil, err
	}
	return &supervisorHost{sup: sup, url: url}, nil
}

func (h *supervisorHost) open(ctx context.Context, n int) error {
	servers := make(map[string]mcpvisor.ServerConfig, n)
	for i := range n {
		servers[fmt.Sprintf("m%04d", i)] = mcpvisor.ServerConfig{
			Config:          transports.Config{Type: transports.TypeHTTP, URL: h.url},
			ProtocolVersion: harness.EraLegacy,
		}
	}
	res, err := h.sup.SetServers(ctx, servers)
	if err == nil && len(res.Errors) > 0 {
		err = fmt.Errorf("SetServers: %v", res.Errors)
	}
	if err == nil {
		err = h.sup.WaitSettled(ctx)
	}
	if err != nil {
		return err
	}
	st := h.sup.Status()
	if len(st) != n {
		return fmt.Errorf("%d servers, want %d", len(st), n)
	}
	for _, s := range st {
		if s.State != mcpvisor.StateReady || s.ProtocolVersion != harness.EraLegacy {
			return fmt.Errorf("server %s: %s at %q, want ready at %q", s.Name, s.State, s.ProtocolVersion, harness.EraLegacy)
		}
	}
	return nil
}

func (h *supervisorHost) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return h.sup.Close(ctx)
}

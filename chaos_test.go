//go:build linux

package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

// After the chaos, what a server must reach again.
type chaosOutcome int

const (
	answersAgain chaosOutcome = iota // a call succeeds again (waking it if it parked)
	noCheck                          // faults on every call (hangs, crashes): only "never hangs" applies
	staysParked                      // it can never start: parked in failed
)

// chaosFault is one way a server misbehaves in TestChaos.
type chaosFault struct {
	name    string
	outcome chaosOutcome
	stdio   []string                    // mock server flags, for a stdio server
	http    func(o *mockserver.Options) // options, for an HTTP server
	proxied bool                        // behind a faultProxy whose 503 bursts come and go
}

var chaosFaults = []chaosFault{
	{name: "healthy", stdio: []string{}},
	{name: "crash after calls", stdio: []string{"-exit-after", "3"}},
	{name: "slow", stdio: []string{"-latency", "150ms"}},
	{name: "garbage", stdio: []string{"-garbage"}},
	{name: "grandchild", stdio: []string{"-grandchild"}},
	{name: "ignores SIGTERM", stdio: []string{"-ignore-sigterm", "-exit-after", "5"}},
	{name: "flaps", stdio: []string{"-flap-up", "700ms"}},
	{name: "oversize answers", outcome: noCheck, stdio: []string{"-oversize", "1500000"}},
	{name: "hangs on calls", outcome: noCheck, stdio: []string{"-hang-on-call"}},
	{name: "crashes mid-response", outcome: noCheck, stdio: []string{"-crash-mid-response"}},
	{name: "exits at start", outcome: staysParked, stdio: []string{"-exit-at-start"}},

	{name: "http healthy", http: func(*mockserver.Options) {}},
	{name: "http 503 burst", http: func(o *mockserver.Options) { o.HTTP5xx = 4 }},
	{name: "http session expiry", http: func(o *mockserver.Options) { o.ExpireSessionAfter = 3 }},
	{name: "http slow first byte", http: func(o *mockserver.Options) { o.FirstByteDelay = 100 * time.Millisecond }},
	// Resumption with Last-Event-ID exists in the session eras only: in
	// the stateless one a dropped stream fails its call.
	{name: "http dropped streams", http: func(o *mockserver.Options) {
		o.SSEResponses, o.DropStream, o.Versions = true, true, []string{protocol.Version20251125}
	}},
	{name: "http flaps", http: func(o *mockserver.Options) { o.FlapUp, o.FlapDown = 800*time.Millisecond, 300*time.Millisecond }},
	{name: "http 503 bursts come and go", http: func(*mockserver.Options) {}, proxied: true},
	{name: "http stateless", http: func(o *mockserver.Options) { o.Versions = []string{protocol.Version20260728} }},
}

// chaosEnv reads a duration or integer knob of TestChaos from the
// environment.
func chaosEnv[T int64 | time.Duration](name string, def T, parse func(string) (T, error)) T {
	if v, err := parse(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestChaos runs 50 servers over stdio and HTTP, each with a fault, while
// callers call them continuously, and checks that supervision holds:
// every call ends by its deadline with a result or a typed error; every
// server that can recover answers again within its backoff budget; memory
// and goroutines stay bounded; after Close no process of any server
// remains (and TestMain's goleak finds no goroutine).
//
// MCPVISOR_CHAOS_SEED replays a run; MCPVISOR_CHAOS_DURATION (e.g. 2m)
// makes it longer.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos takes about 30 s")
	}
	seed := chaosEnv("MCPVISOR_CHAOS_SEED", time.Now().UnixNano(), func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) })
	duration := chaosEnv("MCPVISOR_CHAOS_DURATION", 12*time.Second, time.ParseDuration)
	t.Logf("seed %d (MCPVISOR_CHAOS_SEED), chaos for %v", seed, duration)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))

	opts := testOptions
	opts.MaxFrameSize = 1 << 20
	opts.Reconnect = ReconnectPolicy{InitialDelay: Duration(50 * time.Millisecond), MaxDelay: Duration(time.Second), StableAfter: Duration(2 * time.Second)}
	s, err := Start(context.Background(), opts)
	require.NoError(t, err)

	// 50 servers: every fault at least once, the rest drawn at random.
	const numServers = 50
	faults := make(map[string]chaosFault, numServers)
	servers := make(map[string]ServerConfig, numServers)
	var proxies []*faultProxy
	for i := range numServers {
		f := chaosFaults[i%len(chaosFaults)]
		if i >= len(chaosFaults) {
			f = chaosFaults[rng.IntN(len(chaosFaults))]
		}
		name := fmt.Sprintf("s%02d", i)
		faults[name] = f
		if f.stdio != nil {
			servers[name] = mock(f.stdio...)
			continue
		}
		o := mockserver.Options{Transport: mockserver.TransportHTTP}
		f.http(&o)
		srv := serveMock(t, o)
		url := srv.URL
		if f.proxied {
			p := newFaultProxy(t, url)
			proxies = append(proxies, p)
			url = p.URL
		}
		servers[name] = remoteServer(transports.TypeHTTP, url)
	}
	// Registered after the mock servers' cleanups, so it runs before them:
	// when the test fails before its own Close (a wave that does not settle
	// on a loaded machine), the servers' connections are closed first, and
	// httptest's Close does not wait on them forever.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Close(ctx) // idempotent: a no-op after the test's own Close
	})
	setAndSettle(t, s, servers)

	// Every process group a stdio server ever had, to check after Close.
	var pgMu sync.Mutex
	pgids := map[int]bool{}
	recordPids := func() {
		pgMu.Lock()
		defer pgMu.Unlock()
		for name := range servers {
			if pid := pidOf(s, name); pid > 0 {
				pgids[pid] = true
			}
		}
	}

	ctx, stop := context.WithTimeout(context.Background(), duration)
	defer stop()
	var background sync.WaitGroup

	// Bursts of 503 that come and go, and the watchers of processes and
	// memory.
	var maxHeap, maxGoroutines atomic.Uint64
	background.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				for _, p := range proxies {
					p.mode.Store(passThrough)
				}
				return
			case <-tick.C:
			}
			recordPids()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			maxHeap.Store(max(maxHeap.Load(), ms.HeapInuse))
			maxGoroutines.Store(max(maxGoroutines.Load(), uint64(runtime.NumGoroutine())))
			if n%6 == 0 {
				for _, p := range proxies {
					if rng.IntN(2) == 0 {
						p.mode.Store(answer503)
					} else {
						p.mode.Store(passThrough)
					}
				}
			}
		}
	})

	// Callers: each call has its own deadline and must end by it.
	const callers = 8
	const slack = 2 * time.Second // scheduling on a loaded 2-vCPU machine under -race
	var (
		calls, succeeded atomic.Int64
		problemsMu       sync.Mutex
		problems         []string
		errorKinds       = map[string]int{}
		errorExamples    = map[string]string{} // one per kind and fault, for the log
	)
	report := func(format string, args ...any) {
		problemsMu.Lock()
		defer problemsMu.Unlock()
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	for c := range callers {
		crng := rand.New(rand.NewPCG(uint64(seed), uint64(c+1)))
		background.Go(func() {
			for ctx.Err() == nil {
				name := names[crng.IntN(len(names))]
				deadline := time.Duration(200+crng.IntN(1800)) * time.Millisecond
				cctx, cancel := context.WithTimeout(context.Background(), deadline)
				began := time.Now()
				res, err := s.CallTool(cctx, "mcp__"+name+"__echo", json.RawMessage(`{"text":"chaos"}`))
				took := time.Since(began)
				cancel()
				calls.Add(1)
				if took > deadline+slack {
					report("%s (%s): a call with a %v deadline took %v: %v", name, faults[name].name, deadline, took, err)
				}
				switch {
				case err == nil && res != nil:
					succeeded.Add(1)
				case err == nil:
					report("%s (%s): no result and no error", name, faults[name].name)
				case !typedCallError(err):
					report("%s (%s): untyped error %T: %v", name, faults[name].name, err, err)
				default:
					kind := string(ClassifyFailure(err))
					problemsMu.Lock()
					errorKinds[kind]++
					errorExamples[kind+" / "+faults[name].name] = err.Error()
					problemsMu.Unlock()
				}
			}
		})
	}
	testwait.CallWithin(t, duration+testwait.Patience, "the chaos's callers to stop", background.Wait)
	t.Logf("%d calls, %d answered; errors by kind %v; peak heap in use %d MiB, peak goroutines %d",
		calls.Load(), succeeded.Load(), errorKinds, maxHeap.Load()>>20, maxGoroutines.Load())
	for _, k := range slices.Sorted(maps.Keys(errorExamples)) {
		t.Logf("%s: %.200s", k, errorExamples[k])
	}
	assert.Empty(t, problems, "every call ends by its deadline with a result or a typed error")
	assert.Less(t, maxHeap.Load(), uint64(512<<20), "heap stays bounded")
	assert.Less(t, maxGoroutines.Load(), uint64(5000), "goroutines stay bounded")

	// After the chaos: every server that can recover answers again (a
	// call wakes those that parked) within its backoff budget; those that
	// cannot start stay parked.
	budget := 15 * time.Second
	var verify sync.WaitGroup
	for name, f := range faults {
		verify.Go(func() {
			switch f.outcome {
			case answersAgain:
				deadline := time.Now().Add(budget)
				var err error
				for time.Now().Before(deadline) {
					cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					_, err = s.CallTool(cctx, "mcp__"+name+"__echo", json.RawMessage(`{"text":"after"}`))
					cancel()
					if err == nil {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
				report("%s (%s) does not answer again within %v: %v (%+v)", name, f.name, budget, err, statusOf(s, name))
			case staysParked:
				if !assert.Eventually(t, func() bool { return statusOf(s, name).State == StateFailed }, budget, 20*time.Millisecond) {
					report("%s (%s) is %s, not parked", name, f.name, statusOf(s, name).State)
				}
			}
		})
	}
	testwait.Call(t, "every server's check after the chaos", verify.Wait)
	assert.Empty(t, problems, "every server that can recover answers again")

	recordPids()
	closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.Close(closeCtx))
	for pgid := range pgids {
		assert.Empty(t, stdiotest.WaitGroupGone(pgid, 5*time.Second), "process group %d outlived Close", pgid)
	}
	assert.Empty(t, childrenOf(os.Getpid()), "no child process (or zombie) outlives Close")
}

// typedCallError reports whether err is one a host can act on: one of
// mcpvisor's error types or sentinels, the server's JSON-RPC error, or a
// classified transport failure.
func typedCallError(err error) bool {
	var (
		notReady *NotReadyError
		lost     *ConnectionLostError
		timeout  *session.TimeoutError
		rpcErr   *protocol.Error
		status   *transports.HTTPStatusError
		tooBig   *transports.FrameTooLargeError
	)
	switch {
	case errors.Is(err, ErrUnknownTool), errors.As(err, &notReady), errors.As(err, &lost), errors.As(err, &timeout),
		errors.As(err, &rpcErr), errors.As(err, &status), errors.As(err, &tooBig),
		errors.Is(err, session.ErrMalformedResponse), errors.Is(err, session.ErrConnectionClosed),
		errors.Is(err, transports.ErrSessionExpired), errors.Is(err, transports.ErrStreamBroken):
		return true
	}
	return transports.Classify(err) != transports.ClassOther
}

// childrenOf lists the processes whose parent is pid, zombies included.
func childrenOf(pid int) []string {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []string
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after
		// its closing parenthesis.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) >= 2 && fields[1] == strconv.Itoa(pid) {
			out = append(out, strings.TrimSpace(s[:i+1])+" state "+fields[0])
		}
	}
	return out
}

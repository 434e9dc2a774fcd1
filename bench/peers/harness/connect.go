package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Spawn is the client name of the connect scenario's baseline: bare
// processes of the mock server binary that exit at once, as many at a
// time as the pool.
const Spawn = "spawn"

// closeTimeout bounds closing everything a connect opened.
const closeTimeout = 2 * time.Minute

// fleet is what one client opened in the connect scenario.
type fleet interface {
	// open connects n servers (sessions) and returns once all are ready.
	open(ctx context.Context, n int) error
	// close closes them all, and whatever the client prepared.
	close() error
}

func (r *runner) connectScenario(ctx context.Context) {
	clients := append([]string{}, r.cfg.Clients...)
	total := len(r.cfg.ConnectStdio)*(len(clients)+1) + len(r.cfg.ConnectHTTP)*len(clients)
	if slices.Contains(clients, McpGo) {
		total += len(r.cfg.ConnectStdio) + len(r.cfg.ConnectHTTP) // mcpgo-listen
	}
	r.prog.Begin(ScenarioConnect, total)
	runs := len(r.res.Connect)
	for _, n := range r.cfg.ConnectStdio {
		cmd := Command{Path: r.bins.Mock}
		r.connectOne(ctx, Spawn, TransportStdio, "", n, r.cfg.Pool, func() (fleet, error) {
			return &spawnFleet{bin: r.bins.Mock, pool: r.cfg.Pool}, nil
		})
		for _, name := range clients {
			p, _ := PeerByName(name)
			r.connectOne(ctx, name, TransportStdio, ConnectEraStdio, n, r.cfg.Pool, func() (fleet, error) {
				if name == Mcpvisor {
					return startSupervisorFleet(ctx, transports.Config{Command: cmd.Path, Args: cmd.Args}, ConnectEraStdio, r.cfg.Pool, 0)
				}
				return &sessionFleet{pool: r.cfg.Pool, connect: func(ctx context.Context, _ int) (Session, error) {
					return p.Connect(ctx, cmd, ConnectEraStdio)
				}}, nil
			})
			if name == McpGo {
				// mcpvisor opens a subscriptions/listen stream before it
				// lists (so that it hears of changes); mcp-go does not
				// unless asked: the same work is this row.
				r.connectOne(ctx, McpGoListen, TransportStdio, ConnectEraStdio, n, r.cfg.Pool, func() (fleet, error) {
					return &sessionFleet{pool: r.cfg.Pool, connect: func(ctx context.Context, _ int) (Session, error) {
						return ConnectMcpGoListen(ctx, cmd, ConnectEraStdio)
					}}, nil
				})
			}
		}
	}
	if len(r.cfg.ConnectHTTP) > 0 && ctx.Err() == nil {
		srv, err := StartNetServer(r.bins.Mock, mockserver.URLLinePrefix, "-transport", mockserver.TransportHTTP, "-listen", mockserver.DefaultListen)
		if err != nil {
			r.fail("HTTP mock server: %v", err)
		} else {
			for _, n := range r.cfg.ConnectHTTP {
				for _, name := range clients {
					p, _ := PeerByName(name)
					r.connectOne(ctx, name, TransportHTTP, ConnectEraHTTP, n, r.cfg.HTTPPool, func() (fleet, error) {
						if name == Mcpvisor {
							return startSupervisorFleet(ctx, transports.Config{Type: transports.TypeHTTP, URL: srv.URL}, ConnectEraHTTP, 0, r.cfg.HTTPPool)
						}
						return &sessionFleet{pool: r.cfg.HTTPPool, shared: PeerHTTPClient.CloseIdleConnections, connect: func(ctx context.Context, i int) (Session, error) {
							return p.ConnectHTTP(ctx, virtualServerURL(srv.URL, i), ConnectEraHTTP)
						}}, nil
					})
					if name == McpGo {
						// mcp-go opens no standalone GET stream unless asked:
						// the same work as mcpvisor's and go-sdk's sessions
						// (a stream on which the server can announce changes)
						// is this row.
						r.connectOne(ctx, McpGoListen, TransportHTTP, ConnectEraHTTP, n, r.cfg.HTTPPool, func() (fleet, error) {
							return &sessionFleet{pool: r.cfg.HTTPPool, shared: PeerHTTPClient.CloseIdleConnections, connect: func(ctx context.Context, i int) (Session, error) {
								return ConnectMcpGoHTTPWith(ctx, virtualServerURL(srv.URL, i), ConnectEraHTTP, mcpgotransport.WithContinuousListening())
							}}, nil
						})
					}
				}
			}
			if err := srv.Stop(); err != nil {
				r.fail("HTTP mock server: %v", err)
			}
		}
	}
	r.prog.End("%d runs", len(r.res.Connect)-runs)
}

// connectOne measures one client opening n servers: prepare (untimed,
// before the baseline: a host's one-time cost, such as starting a
// Supervisor), open (timed), then close (timed).
func (r *runner) connectOne(ctx context.Context, client, transport, era string, n, pool int, prepare func() (fleet, error)) {
	if ctx.Err() != nil {
		return
	}
	r.prog.Step("%s %s N=%d pool=%d", client, transport, n, pool)
	res := ConnectResult{Client: client, Transport: transport, Era: era, N: n, Pool: pool}
	defer func() { r.res.Connect = append(r.res.Connect, res) }()
	f, err := prepare()
	if err != nil {
		res.Error = r.fail("%s %s N=%d: %v", client, transport, n, err)
		return
	}
	// The previous run's freed pages go back to the OS first, so that
	// every client's peak RSS grows from the same floor.
	debug.FreeOSMemory()
	before := idleSnapshot()
	res.PeakRSSSinceStart = !ResetPeakRSS()
	stopSampling := sampleGoroutines()
	octx, cancel := context.WithTimeout(ctx, connectTimeout+time.Duration(n)*50*time.Millisecond)
	stopProfile := r.profileConnect("connect", client, transport, n)
	cpu0, helper0 := CPUTime(), HelperCPUTime()
	t0 := time.Now()
	err = f.open(octx, n)
	ready := time.Since(t0)
	cpu, helper := CPUTime()-cpu0, HelperCPUTime()-helper0
	stopProfile()
	cancel()
	res.PeakGoroutines = stopSampling()
	res.PeakRSSBytes = PeakRSS()
	res.PeakRSSGrowthBytes = res.PeakRSSBytes - before.rss
	if err != nil {
		res.Error = r.fail("%s %s N=%d: %v", client, transport, n, err)
	} else {
		res.AllReadyMs, res.CPUMs, res.HelperCPUMs = ms(ready), ms(cpu+helper), ms(helper)
		if client != Spawn {
			after := idleSnapshot()
			res.HeapPerConn = float64(int64(after.heapAlloc)-int64(before.heapAlloc)) / float64(n)
			res.HeapInusePerConn = float64(int64(after.heapInuse)-int64(before.heapInuse)) / float64(n)
			res.StackPerConn = float64(int64(after.stack)-int64(before.stack)) / float64(n)
			res.GoroutinesPerConn = float64(after.goroutines-before.goroutines) / float64(n)
			res.FDs = after.fds
			res.FDsPerConn = float64(after.fds-before.fds) / float64(n)
			res.RSSGrowthBytes = after.rss - before.rss
		}
	}
	stopProfile = r.profileConnect("close", client, transport, n)
	t1 := time.Now()
	cerr := f.close()
	res.CloseMs = ms(time.Since(t1))
	stopProfile()
	if cerr != nil {
		msg := r.fail("%s %s N=%d: close: %v", client, transport, n, cerr)
		if res.Error == "" {
			res.Error = msg
		}
	}
}

// snap is the client's state at one moment.
type snap struct {
	heapAlloc, heapInuse, stack uint64
	goroutines, fds             int
	rss                         int64
}

// idleSnapshot waits until the number of goroutines is steady
// (connections being opened or closed in the background), collects
// garbage twice and reads the state.
func idleSnapshot() snap {
	settleGoroutines(5 * time.Second)
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return snap{ms.HeapAlloc, ms.HeapInuse, ms.StackInuse, runtime.NumGoroutine(), OpenFDs(), RSS()}
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

// sampleGoroutines samples runtime.NumGoroutine every 2 ms until the
// returned function is called, which returns the peak.
func sampleGoroutines() func() int {
	var peak atomic.Int64
	peak.Store(int64(runtime.NumGoroutine()))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if n := int64(runtime.NumGoroutine()); n > peak.Load() {
					peak.Store(n)
				}
			case <-stop:
				return
			}
		}
	}()
	return func() int {
		close(stop)
		<-done
		return int(peak.Load())
	}
}

// Parallel runs f(0) … f(n-1), workers at a time, and returns the first
// error; after an error the calls not yet started are skipped.
func Parallel(n, workers int, f func(i int) error) error {
	var (
		next     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := f(int(i)); err != nil {
					once.Do(func() { firstErr = err })
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// --- the peers: n sessions, pool at a time ---

type sessionFleet struct {
	pool     int
	connect  func(ctx context.Context, i int) (Session, error) // the i-th session
	shared   func()                                            // closes the idle connections of a shared HTTP client, if any
	sessions []Session
}

func (f *sessionFleet) open(ctx context.Context, n int) error {
	f.sessions = make([]Session, n)
	return Parallel(n, f.pool, func(i int) error {
		s, err := f.connect(ctx, i)
		if err != nil {
			return err
		}
		f.sessions[i] = s
		return nil
	})
}

func (f *sessionFleet) close() error {
	var mu sync.Mutex
	var errs []error
	Parallel(len(f.sessions), f.pool, func(i int) error {
		if s := f.sessions[i]; s != nil {
			if err := s.Close(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}
		return nil
	})
	f.sessions = nil
	if f.shared != nil {
		f.shared()
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d sessions failed to close, e.g. %w", len(errs), errs[0])
	}
	return nil
}

// --- mcpvisor: n servers in one Supervisor ---

type supervisorFleet struct {
	sup *mcpvisor.Supervisor
	tc  transports.Config
	era string
}

// startSupervisorFleet starts the Supervisor (a host's one-time cost) with
// the given connect limits (0: the default) and options changed by
// configure.
func startSupervisorFleet(ctx context.Context, tc transports.Config, era string, local, remote int, configure ...func(*mcpvisor.Options)) (fleet, error) {
	opts := mcpvisor.Options{LocalConnectLimit: local, RemoteConnectLimit: remote}
	for _, c := range configure {
		c(&opts)
	}
	sup, err := mcpvisor.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &supervisorFleet{sup: sup, tc: tc, era: era}, nil
}

// virtualServerURL is the URL of the i-th remote server of a fleet
// served by one mock process: each on its own path (/mcp/s0042), as
// remote servers of different URLs are.
func virtualServerURL(base string, i int) string { return base + "/" + serverName(i) }

// serverName names the i-th of the fleet's servers.
func serverName(i int) string { return fmt.Sprintf("s%04d", i) }

func (f *supervisorFleet) open(ctx context.Context, n int) error {
	servers := make(map[string]mcpvisor.ServerConfig, n)
	for i := range n {
		tc := f.tc
		if tc.URL != "" {
			tc.URL = virtualServerURL(tc.URL, i)
		}
		servers[serverName(i)] = mcpvisor.ServerConfig{Config: tc, ProtocolVersion: Pinned(f.era)}
	}
	return setAndSettle(ctx, f.sup, servers)
}

// setAndSettle gives sup its servers and waits until every one is ready.
func setAndSettle(ctx context.Context, sup *mcpvisor.Supervisor, servers map[string]mcpvisor.ServerConfig) error {
	res, err := sup.SetServers(ctx, servers)
	if err == nil && len(res.Errors) > 0 {
		err = fmt.Errorf("SetServers: %v", res.Errors)
	}
	if err == nil {
		err = sup.WaitSettled(ctx)
	}
	if err != nil {
		return err
	}
	st := sup.Status()
	if len(st) != len(servers) {
		return fmt.Errorf("%d servers, want %d", len(st), len(servers))
	}
	notReady := 0
	var example mcpvisor.ServerStatus
	for _, s := range st {
		if s.State != mcpvisor.StateReady {
			if notReady == 0 {
				example = s
			}
			notReady++
		}
	}
	if notReady > 0 {
		return fmt.Errorf("%d of %d servers not ready, e.g. %s: %s (%s)", notReady, len(st), example.Name, example.State, example.LastError)
	}
	return nil
}

func (f *supervisorFleet) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	return f.sup.Close(ctx)
}

// --- the baseline: bare processes ---

// spawnFleet starts n processes of the mock server's binary, pool at a
// time, each exiting at once (-exit-at-start: exec and the Go runtime's
// start, nothing else), and waits for them all.
type spawnFleet struct {
	bin  string
	pool int
}

func (f *spawnFleet) open(ctx context.Context, n int) error {
	return Parallel(n, f.pool, func(int) error {
		cmd := exec.CommandContext(ctx, f.bin, "-exit-at-start")
		cmd.Stderr = nil
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 4 {
			err = nil // -exit-at-start's code
		}
		return err
	})
}

func (f *spawnFleet) close() error { return nil }

// profileConnect starts a CPU profile of one phase ("connect" or
// "close") of mcpvisor's connect run when the run asks for them
// (ConnectProfiles) and returns what stops it.
func (r *runner) profileConnect(phase, client, transport string, n int) (stop func()) {
	if r.cfg.ConnectProfiles == "" || client != Mcpvisor {
		return func() {}
	}
	if err := os.MkdirAll(r.cfg.ConnectProfiles, 0o755); err != nil {
		r.fail("connect profile: %v", err)
		return func() {}
	}
	f, err := os.Create(filepath.Join(r.cfg.ConnectProfiles, fmt.Sprintf("%s-%s-%d.pprof", phase, transport, n)))
	if err != nil {
		r.fail("connect profile: %v", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		r.fail("connect profile: %v", err)
		return func() {}
	}
	// A second into the phase, what every goroutine waits on: the wall
	// time a CPU profile does not show.
	dump := time.AfterFunc(time.Second, func() {
		g, err := os.Create(filepath.Join(r.cfg.ConnectProfiles, fmt.Sprintf("%s-%s-%d.goroutines.txt", phase, transport, n)))
		if err != nil {
			return
		}
		defer g.Close()
		_ = pprof.Lookup("goroutine").WriteTo(g, 1)
	})
	return func() {
		dump.Stop()
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			r.fail("connect profile: %v", err)
		}
	}
}

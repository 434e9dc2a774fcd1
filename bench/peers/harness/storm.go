package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
)

// stormWait bounds each wait of the storm: the calls to be in flight,
// their failure, the recovery.
const stormWait = 2 * time.Minute

func (r *runner) stormScenario(ctx context.Context) {
	r.prog.Begin(ScenarioStorm, len(r.cfg.StormN))
	for _, n := range r.cfg.StormN {
		if ctx.Err() != nil {
			break
		}
		r.prog.Step("mcpvisor stdio N=%d pool=%d", n, r.cfg.Pool)
		res := r.storm(ctx, n)
		if res.Error != "" {
			r.fail("N=%d: %s", n, res.Error)
		}
		r.res.Storm = append(r.res.Storm, res)
	}
	r.prog.End("%d storms", len(r.cfg.StormN))
}

// callEnd is how and when one call returned.
type callEnd struct {
	at  time.Time
	dur time.Duration
	err error
}

// storm connects n stdio servers to one Supervisor (with its default
// reconnect policy), starts a call that sleeps a minute on each, SIGKILLs
// every server process at once (their pids are the processes below this one
// running the mock binary), and measures how the in-flight calls fail,
// how calls sent meanwhile fare, and when every server is ready again.
func (r *runner) storm(ctx context.Context, n int) (res StormResult) {
	res = StormResult{N: n, Pool: r.cfg.Pool}
	fail := func(format string, args ...any) StormResult {
		res.Error = fmt.Sprintf(format, args...)
		return res
	}
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{LocalConnectLimit: r.cfg.Pool})
	if err != nil {
		return fail("start: %v", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if err := sup.Close(cctx); err != nil && res.Error == "" {
			res.Error = fmt.Sprintf("close: %v", err)
		}
	}()
	servers := make(map[string]mcpvisor.ServerConfig, n)
	names := make([]string, n)
	for i := range n {
		names[i] = serverName(i)
		servers[names[i]] = mcpvisor.ServerConfig{Config: transports.Config{Command: r.bins.Mock}}
	}
	sctx, cancel := context.WithTimeout(ctx, connectTimeout+time.Duration(n)*50*time.Millisecond)
	cpu0 := CPUTime() + HelperCPUTime()
	t0 := time.Now()
	err = setAndSettle(sctx, sup, servers)
	cancel()
	if err != nil {
		return fail("connect: %v", err)
	}
	res.InitialReadyMs = ms(time.Since(t0))
	res.InitialCPUMs = ms(CPUTime() + HelperCPUTime() - cpu0)
	pids := Children(r.bins.Mock)
	if len(pids) != n {
		return fail("found %d mock server processes, want %d", len(pids), n)
	}

	// One call in flight on every server: sleep, for longer than the run.
	cctx, cancelCalls := context.WithTimeout(ctx, stormWait)
	defer cancelCalls()
	inFlight := make(chan callEnd, n)
	sleepArgs := json.RawMessage(`{"ms":600000}`)
	for _, name := range names {
		go func() {
			t := time.Now()
			_, err := sup.CallTool(cctx, mcpvisor.QualifiedName(name, "sleep"), sleepArgs)
			inFlight <- callEnd{at: time.Now(), dur: time.Since(t), err: err}
		}()
	}
	if err := pollUntil(stormWait, func() bool {
		sum := 0
		for _, st := range sup.Status() {
			sum += st.InFlight
		}
		return sum == n
	}); err != nil {
		return fail("the calls did not get in flight: %v", err)
	}
	// The calls are in the servers' stdin once in flight; let the servers
	// read them.
	time.Sleep(20 * time.Millisecond)

	// The probes call echo on the servers in turn from the kill until all
	// are ready again.
	var (
		stopProbes atomic.Bool
		probesWG   sync.WaitGroup
		probeMu    sync.Mutex
		probeEnds  []callEnd
		nextServer atomic.Int64
	)
	probe := func() {
		for !stopProbes.Load() {
			name := names[int(nextServer.Add(1))%n]
			t := time.Now()
			_, err := sup.CallTool(cctx, mcpvisor.QualifiedName(name, "echo"), EchoArgs)
			end := callEnd{at: time.Now(), dur: time.Since(t), err: err}
			probeMu.Lock()
			probeEnds = append(probeEnds, end)
			probeMu.Unlock()
		}
	}

	// The recovery is watched on the event stream, as a host would: a
	// Status of every server polled every few milliseconds would cost
	// more CPU than the recovery it measures.
	events := sup.Subscribe(cctx, mcpvisor.BufferSize(8*n))
	stopProfile := sync.OnceFunc(r.profileConnect("storm", Mcpvisor, TransportStdio, n))
	defer stopProfile() // on the early returns below
	cpuKill := CPUTime() + HelperCPUTime()
	killed := time.Now()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for range r.cfg.StormProbes {
		probesWG.Go(probe)
	}

	// How the calls in flight ended.
	res.InFlight = n
	res.FailKinds = map[string]int{}
	var failTimes []time.Duration
	for range n {
		select {
		case end := <-inFlight:
			if end.err == nil {
				res.Succeeded++
				continue
			}
			res.Failed++
			res.FailKinds[describeCallEnd(end.err)]++
			failTimes = append(failTimes, end.at.Sub(killed))
		case <-cctx.Done():
			stopProbes.Store(true)
			return fail("%d of the %d calls in flight had not returned %v after the kill", n-res.Failed-res.Succeeded, n, stormWait)
		}
	}
	slices.Sort(failTimes)
	if len(failTimes) > 0 {
		res.FailP50Ms = ms(Percentile(failTimes, 50))
		res.FailP99Ms = ms(Percentile(failTimes, 99))
		res.FailMaxMs = ms(failTimes[len(failTimes)-1])
	}

	// When every server was ready again.
	last, err := waitReadyAgain(sup, events, n, killed, stormWait)
	res.DetectedMs = ms(time.Since(killed))
	res.RecoveryCPUMs = ms(CPUTime() + HelperCPUTime() - cpuKill)
	stopProfile()
	stopProbes.Store(true)
	probesWG.Wait()
	if err != nil {
		notReady := 0
		for _, st := range sup.Status() {
			if st.State != mcpvisor.StateReady {
				notReady++
			}
		}
		return fail("%d of %d servers not ready again %v after the kill", notReady, n, stormWait)
	}
	res.AllReadyAgainMs = ms(last.Sub(killed))

	res.ProbeKinds = map[string]int{}
	var probeTimes []time.Duration
	for _, end := range probeEnds {
		res.ProbeSent++
		probeTimes = append(probeTimes, end.dur)
		if end.err != nil {
			res.ProbeFailed++
			res.ProbeKinds[describeCallEnd(end.err)]++
		} else {
			res.ProbeOK++
		}
	}
	slices.Sort(probeTimes)
	if len(probeTimes) > 0 {
		res.ProbeP50Ms = ms(Percentile(probeTimes, 50))
		res.ProbeP99Ms = ms(Percentile(probeTimes, 99))
		res.ProbeMaxMs = ms(probeTimes[len(probeTimes)-1])
	}
	return res
}

// waitReadyAgain waits until every one of the n servers is ready on a
// connection made after killed, and returns the newest of their connect
// times. The state events say when to look; Status, read when the
// events count n servers ready (or every 250 ms, should the stream have
// dropped some), says whether it is so.
func waitReadyAgain(sup *mcpvisor.Supervisor, events <-chan mcpvisor.Event, n int, killed time.Time, max time.Duration) (last time.Time, err error) {
	deadline := time.NewTimer(max)
	defer deadline.Stop()
	recheck := time.NewTicker(250 * time.Millisecond)
	defer recheck.Stop()
	ready := make(map[string]bool, n)
	readyCount := 0
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return last, errors.New("the event stream closed")
			}
			st, isState := ev.(*mcpvisor.ServerStateEvent)
			if !isState {
				continue
			}
			now := st.State == mcpvisor.StateReady
			if now != ready[st.Server] {
				ready[st.Server] = now
				if now {
					readyCount++
				} else {
					readyCount--
				}
			}
			if readyCount < n {
				continue
			}
		case <-recheck.C:
		case <-deadline.C:
			return last, fmt.Errorf("gave up after %v", max)
		}
		if last, ok := allReadySince(sup.Status(), killed); ok {
			return last, nil
		}
	}
}

// allReadySince reports whether every server is ready on a connection
// made after t, and the newest of their connect times.
func allReadySince(statuses []mcpvisor.ServerStatus, t time.Time) (last time.Time, ok bool) {
	for _, st := range statuses {
		if st.State != mcpvisor.StateReady || !st.ConnectedSince.After(t) {
			return time.Time{}, false
		}
		if st.ConnectedSince.After(last) {
			last = st.ConnectedSince
		}
	}
	return last, true
}

// pollUntil polls cond every 2 ms until it holds, or fails after max.
func pollUntil(max time.Duration, cond func() bool) error {
	deadline := time.Now().Add(max)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up after %v", max)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// describeCallEnd names how a call failed: typed as a lost connection
// (and which sentinel it matches), as not ready, or else by its failure
// kind.
func describeCallEnd(err error) string {
	var lost *mcpvisor.ConnectionLostError
	var notReady *mcpvisor.NotReadyError
	switch {
	case errors.As(err, &lost) && errors.Is(err, mcpvisor.ErrConnectionClosed):
		return "ConnectionLostError/ErrConnectionClosed"
	case errors.As(err, &lost):
		return "ConnectionLostError/ErrServerRestarting"
	case errors.As(err, &notReady):
		return "NotReadyError"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	}
	return "other/" + string(mcpvisor.ClassifyFailure(err))
}

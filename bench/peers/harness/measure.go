package harness

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// CallStats are the figures of one batch of calls.
type CallStats struct {
	Calls       int     `json:"calls"`
	ElapsedMs   float64 `json:"elapsedMs"`
	CallsPerSec float64 `json:"callsPerSec"`
	P50Us       float64 `json:"p50Us"`
	P90Us       float64 `json:"p90Us"`
	P99Us       float64 `json:"p99Us"`
	MaxUs       float64 `json:"maxUs"`
	// CPUPerCallUs is this process's CPU (getrusage RUSAGE_SELF, user +
	// system) over the batch, per call: the client's, as every server is
	// another process.
	CPUPerCallUs float64 `json:"cpuPerCallUs"`
	// AllocsPerCall and BytesPerCall are runtime.MemStats' Mallocs and
	// TotalAlloc over the batch, per call.
	AllocsPerCall float64 `json:"allocsPerCall"`
	BytesPerCall  float64 `json:"bytesPerCall"`
	// ServerCPUPerCallUs is the server process's CPU over the batch, per
	// call (/proc/<pid>/stat, 10 ms ticks), when its process is known: with
	// client and server on the same CPUs, calls/s in flight is bounded by
	// both.
	ServerCPUPerCallUs float64 `json:"serverCpuPerCallUs,omitempty"`
}

// Batch bounds one batch of calls: at most Calls calls, and no call
// started after Duration.
type Batch struct {
	InFlight int
	Calls    int
	Duration time.Duration
	// ServerPid is the server's process, whose CPU is measured too; 0 for
	// none.
	ServerPid int
}

// Measure makes calls with b.InFlight goroutines each calling call in a
// loop (1: sequentially, in this goroutine) until b.Calls have started or
// b.Duration has passed, and returns the figures. It stops at the first
// error, which it returns with the figures so far.
func Measure(ctx context.Context, b Batch, call func(context.Context) error) (CallStats, error) {
	smp, err := MeasureSample(ctx, b, call)
	st := Combine(smp)
	if err == nil && st.Calls == 0 {
		err = fmt.Errorf("no call completed")
	}
	return st, err
}

// Sample is the raw outcome of one batch: Combine turns samples (of
// interleaved rounds) into figures.
type Sample struct {
	Latencies      []time.Duration // of every call that completed
	Elapsed        time.Duration
	CPU            time.Duration // this process's
	ServerCPU      time.Duration // the server process's; -1 when unknown
	Mallocs, Bytes uint64
}

// MeasureSample is Measure without the figures.
func MeasureSample(ctx context.Context, b Batch, call func(context.Context) error) (Sample, error) {
	workers := max(b.InFlight, 1)
	lat := make([][]time.Duration, workers)
	per := b.Calls/workers + 1
	for i := range lat {
		lat[i] = make([]time.Duration, 0, min(per, 1<<20))
	}
	var (
		next     atomic.Int64
		firstErr error
		once     sync.Once
	)
	deadline := time.Now().Add(b.Duration)
	worker := func(i int) {
		for next.Add(1) <= int64(b.Calls) {
			t0 := time.Now()
			if t0.After(deadline) {
				return
			}
			if err := call(ctx); err != nil {
				once.Do(func() { firstErr = err })
				next.Store(int64(b.Calls)) // stop the others
				return
			}
			lat[i] = append(lat[i], time.Since(t0))
		}
	}

	runtime.GC()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0, srv0 := CPUTime(), ProcessCPUTime(b.ServerPid)
	start := time.Now()
	if workers == 1 {
		worker(0)
	} else {
		var wg sync.WaitGroup
		for i := range workers {
			wg.Go(func() { worker(i) })
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	cpu, srv1 := CPUTime()-cpu0, ProcessCPUTime(b.ServerPid)
	runtime.ReadMemStats(&ms1)
	smp := Sample{
		Latencies: slices.Concat(lat...),
		Elapsed:   elapsed,
		CPU:       cpu,
		ServerCPU: -1,
		Mallocs:   ms1.Mallocs - ms0.Mallocs,
		Bytes:     ms1.TotalAlloc - ms0.TotalAlloc,
	}
	if srv0 >= 0 && srv1 >= srv0 {
		smp.ServerCPU = srv1 - srv0
	}
	return smp, firstErr
}

// Combine sums samples into figures: calls/s is all calls over all the
// samples' time, CPU and allocations per call likewise, and the
// percentiles are over every call.
func Combine(samples ...Sample) CallStats {
	var (
		all            []time.Duration
		elapsed, cpu   time.Duration
		srv            time.Duration
		srvKnown       = len(samples) > 0
		mallocs, bytes uint64
	)
	for _, s := range samples {
		all = append(all, s.Latencies...)
		elapsed += s.Elapsed
		cpu += s.CPU
		mallocs += s.Mallocs
		bytes += s.Bytes
		if s.ServerCPU < 0 {
			srvKnown = false
		}
		srv += s.ServerCPU
	}
	slices.Sort(all)
	n := len(all)
	st := CallStats{Calls: n, ElapsedMs: ms(elapsed)}
	if n == 0 {
		return st
	}
	st.CallsPerSec = float64(n) / elapsed.Seconds()
	st.P50Us = us(Percentile(all, 50))
	st.P90Us = us(Percentile(all, 90))
	st.P99Us = us(Percentile(all, 99))
	st.MaxUs = us(all[n-1])
	st.CPUPerCallUs = us(cpu) / float64(n)
	st.AllocsPerCall = float64(mallocs) / float64(n)
	st.BytesPerCall = float64(bytes) / float64(n)
	if srvKnown {
		st.ServerCPUPerCallUs = us(srv) / float64(n)
	}
	return st
}

// Warm makes n calls with inFlight in flight, unmeasured.
func Warm(ctx context.Context, n, inFlight int, call func(context.Context) error) error {
	if n <= 0 {
		return nil
	}
	_, err := Measure(ctx, Batch{InFlight: inFlight, Calls: n, Duration: time.Hour}, call)
	return err
}

// Percentile returns the p-th percentile of sorted (nearest rank).
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))/100+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// EchoCall returns a call of s's echo that checks the text echoed: want
// (its length, and its first 16 bytes: comparing a whole MiB per call
// would cost the client more than the check is worth).
func EchoCall(s Session, want string) func(context.Context) error {
	head := want[:min(16, len(want))]
	return func(ctx context.Context) error {
		text, err := s.Echo(ctx)
		if err != nil {
			return err
		}
		if len(text) != len(want) || text[:len(head)] != head {
			return fmt.Errorf("echo returned %d bytes (%.16q…), want %d (%.16q…)", len(text), text, len(want), want)
		}
		return nil
	}
}

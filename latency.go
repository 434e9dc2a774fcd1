package mcpvisor

import (
	"math"
	"sync/atomic"
	"time"
)

// LatencyBuckets are the upper bounds of the latency histogram every
// server keeps of the requests sent on its sessions (CallTool, Prompts().Get,
// Resources().Read, Server(name).Ping): 50 µs to 60 s, roughly ×2.5 apart. A request slower
// than the last bound counts in an overflow bucket.
var LatencyBuckets = []time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second,
	10 * time.Second, 30 * time.Second, 60 * time.Second,
}

// latencyHist is a histogram of request durations.
//
// Concurrency: lock-free; any goroutine may observe and snapshot it
// concurrently (every field is atomic).
type latencyHist struct {
	counts [20]atomic.Uint64 // len(LatencyBuckets)+1
	errors atomic.Uint64
	sum    atomic.Int64 // nanoseconds
}

// observe counts one request of duration d; failed says it ended in an
// error.
func (h *latencyHist) observe(d time.Duration, failed bool) {
	i := 0
	for i < len(LatencyBuckets) && d > LatencyBuckets[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
	if failed {
		h.errors.Add(1)
	}
}

// stats returns a snapshot.
func (h *latencyHist) stats() LatencyStats {
	st := LatencyStats{Counts: make([]uint64, len(LatencyBuckets)+1), Errors: h.errors.Load(), Sum: time.Duration(h.sum.Load())}
	for i := range st.Counts {
		st.Counts[i] = h.counts[i].Load()
		st.Calls += st.Counts[i]
	}
	st.P50 = st.quantile(0.50)
	st.P99 = st.quantile(0.99)
	return st
}

// quantile returns the upper bound of the bucket that holds rank q.
func (st LatencyStats) quantile(q float64) time.Duration {
	if st.Calls == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(st.Calls)))
	var seen uint64
	for i, c := range st.Counts {
		seen += c
		if seen >= rank {
			if i < len(LatencyBuckets) {
				return LatencyBuckets[i]
			}
			break
		}
	}
	return LatencyBuckets[len(LatencyBuckets)-1] * 2 // overflow: beyond the last bound
}

package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// results is everything one run measured.
type results struct {
	Servers    int             `json:"servers"`
	Members    int             `json:"members"`
	AllReadyMS float64         `json:"all_ready_ms"`
	Memory     []memoryFigures `json:"memory"`
	MockRSS    int64           `json:"mock_rss"`
	MockFiles  int             `json:"mock_open_files"`
	Idle       []idleFigures   `json:"idle"`
	Loads      []loadFigures   `json:"loads"`
	Rehome     rehomeFigures   `json:"rehome"`
	Overview   overviewFigures `json:"overview"`
	// Overlaps counts activations that began while another live member
	// held one of the same server (0 expected).
	Overlaps int `json:"overlaps"`
}

// memoryFigures is one member's memory once every server was ready.
type memoryFigures struct {
	Member     int   `json:"member"`
	Servers    int   `json:"servers"`
	RSS        int64 `json:"rss"`
	PeakRSS    int64 `json:"peak_rss"`
	Heap       int64 `json:"heap"` // live heap (HeapAlloc after a GC)
	HeapInuse  int64 `json:"heap_inuse"`
	OpenFiles  int   `json:"open_files"`
	StackInuse int64 `json:"stack_inuse"`
	Goroutines int   `json:"goroutines"`
}

// idleFigures is one member's cost with every server ready and no call.
type idleFigures struct {
	Member     int     `json:"member"`
	CPUPercent float64 `json:"cpu_percent"`
	ReadBPS    float64 `json:"read_bytes_per_s"`
	WriteBPS   float64 `json:"write_bytes_per_s"`
}

// loadFigures is one load phase.
type loadFigures struct {
	Phase       string         `json:"phase"`
	Servers     int            `json:"servers"`
	Calls       int            `json:"calls"`
	Failed      int            `json:"failed"`
	Classes     map[string]int `json:"classes,omitempty"`
	PerSecond   float64        `json:"calls_per_s"`
	MeanUS      float64        `json:"mean_us"`
	P50US       int64          `json:"p50_us"`
	P99US       int64          `json:"p99_us"`
	CPUPerCall  float64        `json:"cpu_us_per_call"`         // every process: members and mock
	Member0CPU  float64        `json:"member0_cpu_us_per_call"` // the calling member 0 alone
	Note        string         `json:"note,omitempty"`
	WallSeconds float64        `json:"seconds"`
}

// rehomeFigures is the kill -9 of the last member.
type rehomeFigures struct {
	Servers         int     `json:"servers"`
	Done            int     `json:"done"`
	FirstMS         float64 `json:"first_ms"`
	MedianMS        float64 `json:"median_ms"`
	P90MS           float64 `json:"p90_ms"`
	LastMS          float64 `json:"last_ms"`
	SurvivorPeakRSS []int64 `json:"survivor_peak_rss"`
	// Histogram counts the servers ready on a survivor in each second
	// after the kill ([0] = within the first second).
	Histogram []int `json:"histogram_per_second"`
}

// memStats is a member's GET /memstats.
type memStats struct {
	HeapAlloc  int64 `json:"heap_alloc"`
	HeapInuse  int64 `json:"heap_inuse"`
	StackInuse int64 `json:"stack_inuse"`
	Goroutines int   `json:"goroutines"`
}

// loadResult is a member's POST /load answer.
type loadResult struct {
	Calls   int            `json:"calls"`
	Failed  int            `json:"failed"`
	Classes map[string]int `json:"classes"`
	Seconds float64        `json:"seconds"`
	MeanUS  float64        `json:"mean_us"`
	P50US   int64          `json:"p50_us"`
	P99US   int64          `json:"p99_us"`
}

func measureMember(ctx context.Context, m *member, servers int) (memoryFigures, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var st memStats
	if err := m.get(ctx, "/memstats", &st); err != nil {
		return memoryFigures{}, fmt.Errorf("member %d: %w", m.index, err)
	}
	pid := m.cmd.Process.Pid
	rss, err := procStatus(pid, "VmRSS")
	if err != nil {
		return memoryFigures{}, err
	}
	hwm, err := procStatus(pid, "VmHWM")
	if err != nil {
		return memoryFigures{}, err
	}
	return memoryFigures{Member: m.index, Servers: servers, RSS: rss, PeakRSS: hwm,
		Heap: st.HeapAlloc, HeapInuse: st.HeapInuse, OpenFiles: openFiles(pid), StackInuse: st.StackInuse, Goroutines: st.Goroutines}, nil
}

func measureIdle(members []*member, d time.Duration) ([]idleFigures, error) {
	type sample struct {
		cpu    time.Duration
		rd, wr int64
	}
	take := func() ([]sample, error) {
		out := make([]sample, len(members))
		for i, m := range members {
			cpu, err := procCPU(m.cmd.Process.Pid)
			if err != nil {
				return nil, err
			}
			rd, wr, err := procIO(m.cmd.Process.Pid)
			if err != nil {
				return nil, err
			}
			out[i] = sample{cpu, rd, wr}
		}
		return out, nil
	}
	before, err := take()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	time.Sleep(d)
	after, err := take()
	if err != nil {
		return nil, err
	}
	secs := time.Since(t0).Seconds()
	var out []idleFigures
	for i := range members {
		out = append(out, idleFigures{Member: i,
			CPUPercent: 100 * (after[i].cpu - before[i].cpu).Seconds() / secs,
			ReadBPS:    float64(after[i].rd-before[i].rd) / secs,
			WriteBPS:   float64(after[i].wr-before[i].wr) / secs})
	}
	return out, nil
}

// cpuOf sums the CPU time of pids.
func cpuOf(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, pid := range pids {
		c, err := procCPU(pid)
		if err != nil {
			return 0, err
		}
		sum += c
	}
	return sum, nil
}

// runLoad runs POST /load on every member of through at once and sums
// their answers; CPU is every process of pids and member 0's (pid0).
func runLoad(ctx context.Context, phase string, through []*member, servers []string, workers int, d time.Duration, pids []int, pid0 int) (loadFigures, error) {
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	cpu0, err := cpuOf(pids)
	if err != nil {
		return loadFigures{}, err
	}
	m0, err := procCPU(pid0)
	if err != nil {
		return loadFigures{}, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	lf := loadFigures{Phase: phase, Servers: len(servers), Classes: map[string]int{}}
	var weighted float64
	var p50s, p99s []int64
	for _, m := range through {
		wg.Go(func() {
			var r loadResult
			err := m.post(ctx, "/load", map[string]any{"servers": servers, "workers": workers, "duration": d.String()}, &r)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("load through member %d: %w", m.index, err))
				return
			}
			lf.Calls += r.Calls
			lf.Failed += r.Failed
			for k, v := range r.Classes {
				lf.Classes[k] += v
			}
			lf.PerSecond += float64(r.Calls) / r.Seconds
			lf.WallSeconds = max(lf.WallSeconds, r.Seconds)
			weighted += r.MeanUS * float64(r.Calls-r.Failed)
			p50s = append(p50s, r.P50US)
			p99s = append(p99s, r.P99US)
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return lf, errs[0]
	}
	cpu1, err := cpuOf(pids)
	if err != nil {
		return lf, err
	}
	m1, err := procCPU(pid0)
	if err != nil {
		return lf, err
	}
	if ok := lf.Calls - lf.Failed; ok > 0 {
		lf.MeanUS = weighted / float64(ok)
	}
	if lf.Calls > 0 {
		lf.CPUPerCall = float64((cpu1 - cpu0).Microseconds()) / float64(lf.Calls)
		lf.Member0CPU = float64((m1 - m0).Microseconds()) / float64(lf.Calls)
	}
	// With several members the percentiles are the worst member's.
	lf.P50US, lf.P99US = slices.Max(p50s), slices.Max(p99s)
	return lf, nil
}

// spread is the first, median, 90th percentile and last of ats after
// t0, in ms.
func spread(ats []time.Time, t0 time.Time) (first, median, p90, last float64) {
	if len(ats) == 0 {
		return 0, 0, 0, 0
	}
	d := make([]time.Duration, len(ats))
	for i, at := range ats {
		d[i] = at.Sub(t0)
	}
	slices.Sort(d)
	return ms(d[0]), ms(d[len(d)/2]), ms(d[len(d)*9/10]), ms(d[len(d)-1])
}

// perSecond counts ats by whole seconds after t0.
func perSecond(ats []time.Time, t0 time.Time) []int {
	var h []int
	for _, at := range ats {
		s := int(at.Sub(t0) / time.Second)
		for len(h) <= s {
			h = append(h, 0)
		}
		h[s]++
	}
	return h
}

// overviewFigures is one GET /overview (Member.Overview: every member's
// servers and tools) through member 0 once every server was ready.
type overviewFigures struct {
	MS          float64           `json:"ms"`
	Servers     int               `json:"servers"`
	Tools       int               `json:"tools"`
	Unreachable map[string]string `json:"unreachable,omitempty"`
	Error       string            `json:"error,omitempty"`
}

// measureOverview asks m for the cluster-wide overview.
func measureOverview(ctx context.Context, m *member) overviewFigures {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var ov struct {
		Servers     map[string]string `json:"servers"`
		Tools       int               `json:"tools"`
		Unreachable map[string]string `json:"unreachable"`
	}
	t0 := time.Now()
	err := m.get(ctx, "/overview", &ov)
	f := overviewFigures{MS: ms(time.Since(t0)), Servers: len(ov.Servers), Tools: ov.Tools, Unreachable: ov.Unreachable}
	if err != nil {
		f.Error = err.Error()
	}
	return f
}

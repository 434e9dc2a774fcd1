package main

import (
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpvisor/mcpvisor/cluster"
)

// loadRequest is the body of POST /load: workers call the echo tool of
// the servers round robin until Duration has passed.
type loadRequest struct {
	Servers  []string `json:"servers"`
	Workers  int      `json:"workers"`
	Duration string   `json:"duration"`
}

// loadResult is what POST /load answers: the calls made, how many failed
// (by class), and the latency of the successful ones in microseconds.
type loadResult struct {
	Calls   int            `json:"calls"`
	Failed  int            `json:"failed"`
	Classes map[string]int `json:"classes,omitempty"`
	Seconds float64        `json:"seconds"`
	MeanUS  float64        `json:"mean_us"`
	P50US   int64          `json:"p50_us"`
	P99US   int64          `json:"p99_us"`
}

// serveLoad runs a bounded call load through m from inside the member
// process (so the benchmark measures the member, not an HTTP hop to it).
// Each call has a 5 s deadline; the load ends after the duration, capped
// at one minute.
func serveLoad(m *cluster.Member) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req loadRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Servers) == 0 {
			http.Error(w, "body: {servers:[…], workers, duration}", http.StatusBadRequest)
			return
		}
		d, err := time.ParseDuration(req.Duration)
		if err != nil || d <= 0 || d > time.Minute {
			http.Error(w, "duration: a Go duration up to 1m", http.StatusBadRequest)
			return
		}
		workers := min(max(req.Workers, 1), 256)
		var next atomic.Int64
		var mu sync.Mutex
		res := loadResult{Classes: map[string]int{}}
		var lat []int64
		start := time.Now()
		end := start.Add(d)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				var mine []int64
				failed, classes := 0, map[string]int{}
				for time.Now().Before(end) {
					name := req.Servers[int(next.Add(1)-1)%len(req.Servers)]
					ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
					t0 := time.Now()
					out, err := m.CallServerTool(ctx, name, "echo", json.RawMessage(`{"text":"hi"}`))
					cancel()
					switch {
					case err != nil:
						failed++
						classes[classify(err)]++
					case out == nil || out.IsError:
						failed++
						classes["tool-error"]++
					default:
						mine = append(mine, time.Since(t0).Microseconds())
					}
				}
				mu.Lock()
				defer mu.Unlock()
				lat = append(lat, mine...)
				res.Failed += failed
				for k, v := range classes {
					res.Classes[k] += v
				}
			})
		}
		wg.Wait()
		res.Seconds = time.Since(start).Seconds()
		res.Calls = len(lat) + res.Failed
		if len(lat) > 0 {
			slices.Sort(lat)
			var sum int64
			for _, l := range lat {
				sum += l
			}
			res.MeanUS = float64(sum) / float64(len(lat))
			res.P50US = lat[len(lat)/2]
			res.P99US = lat[len(lat)*99/100]
		}
		_ = json.NewEncoder(w).Encode(res)
	}
}

// serveMemStats answers the process's Go memory figures (bytes) and
// goroutine count, after a GC so that the heap is the live heap.
func serveMemStats(w http.ResponseWriter, _ *http.Request) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"heap_inuse": ms.HeapInuse, "heap_alloc": ms.HeapAlloc, "stack_inuse": ms.StackInuse,
		"sys": ms.Sys, "goroutines": runtime.NumGoroutine(),
	})
}

package main

import (
	"fmt"
	"io"
	"runtime"
)

// mib formats bytes as MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// kib formats bytes as KiB.
func kib(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }

// printTable writes what r holds as Markdown.
func printTable(w io.Writer, c config, r *results) {
	fmt.Fprintf(w, "## cluster: %d servers over %d members (%d CPUs, %s, %d workers per member, %s per load phase)\n\n",
		r.Servers, r.Members, runtime.NumCPU(), runtime.Version(), c.workers, c.duration)
	fmt.Fprintf(w, "| figure | value |\n|---|---:|\n")
	fmt.Fprintf(w, "| all %d servers ready (from starting the members) | %.0f ms |\n", r.Servers, r.AllReadyMS)
	fmt.Fprintf(w, "| mock RSS (every virtual server) | %s |\n", mib(r.MockRSS))
	fmt.Fprintf(w, "| mock open descriptors | %d |\n", r.MockFiles)
	fmt.Fprintf(w, "| activations beside another live one | %d |\n", r.Overlaps)
	o := r.Overview
	fmt.Fprintf(w, "| cluster-wide overview through member 0 | %.0f ms: %d servers, %d tools, unreachable %v %s |\n\n", o.MS, o.Servers, o.Tools, o.Unreachable, o.Error)

	if len(r.Memory) > 0 {
		// Per server: the whole figure ÷ the member's servers, an upper
		// bound (it includes the member's own base, about 9 MiB of live
		// heap for a member with no server).
		fmt.Fprintf(w, "| member | servers | RSS | peak RSS | live heap | heap in use | stacks | goroutines | descriptors | RSS per server | live heap per server |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, m := range r.Memory {
			per, heapPer := "–", "–"
			if m.Servers > 0 {
				per = kib(float64(m.RSS) / float64(m.Servers))
				heapPer = kib(float64(m.Heap) / float64(m.Servers))
			}
			fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %s | %d | %d | %s | %s |\n", m.Member, m.Servers, mib(m.RSS),
				mib(m.PeakRSS), mib(m.Heap), mib(m.HeapInuse), mib(m.StackInuse), m.Goroutines, m.OpenFiles, per, heapPer)
		}
		fmt.Fprintln(w)
	}
	if len(r.Idle) > 0 {
		fmt.Fprintf(w, "| member | idle CPU | idle syscall bytes read/s | written/s |\n|---|---:|---:|---:|\n")
		for _, i := range r.Idle {
			fmt.Fprintf(w, "| %d | %.1f %% | %s | %s |\n", i.Member, i.CPUPercent, kib(i.ReadBPS), kib(i.WriteBPS))
		}
		fmt.Fprintln(w)
	}
	if len(r.Loads) > 0 {
		fmt.Fprintf(w, "| load | servers | calls | failed | calls/s | mean | p50 | p99 | CPU per call (all processes) | member 0's CPU per call |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, l := range r.Loads {
			if l.Note != "" {
				fmt.Fprintf(w, "| %s | – | %s | | | | | | | |\n", l.Phase, l.Note)
				continue
			}
			fmt.Fprintf(w, "| %s | %d | %d | %d %v | %.0f | %.0f µs | %d µs | %d µs | %.0f µs | %.0f µs |\n", l.Phase, l.Servers, l.Calls,
				l.Failed, classes(l.Classes), l.PerSecond, l.MeanUS, l.P50US, l.P99US, l.CPUPerCall, l.Member0CPU)
		}
		if len(r.Loads) >= 2 && r.Loads[0].MeanUS > 0 && r.Loads[0].CPUPerCall > 0 {
			lo, cr := r.Loads[0], r.Loads[1]
			fmt.Fprintf(w, "\ncross-member ÷ local: mean latency %.2f×, p50 %.2f×, CPU per call (all processes) %.2f×\n",
				cr.MeanUS/lo.MeanUS, float64(cr.P50US)/float64(max(lo.P50US, 1)), cr.CPUPerCall/lo.CPUPerCall)
		}
		fmt.Fprintln(w)
	}
	if r.Rehome.Servers > 0 {
		fmt.Fprintf(w, "| kill -9 of member %d | value |\n|---|---:|\n", r.Members-1)
		fmt.Fprintf(w, "| its servers | %d (%d ready on a survivor) |\n", r.Rehome.Servers, r.Rehome.Done)
		fmt.Fprintf(w, "| first / median / 90 %% / last ready on a survivor, after the kill | %.0f / %.0f / %.0f / %.0f ms |\n",
			r.Rehome.FirstMS, r.Rehome.MedianMS, r.Rehome.P90MS, r.Rehome.LastMS)
		fmt.Fprintf(w, "| ready in each second after the kill | %v |\n", r.Rehome.Histogram)
		for i, p := range r.Rehome.SurvivorPeakRSS {
			fmt.Fprintf(w, "| member %d peak RSS (whole run) | %s |\n", i, mib(p))
		}
		fmt.Fprintln(w)
	}
}

// classes formats failure classes, empty when there are none.
func classes(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	return fmt.Sprint(m)
}

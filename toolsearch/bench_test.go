package toolsearch

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// benchQueries are requests of the kinds a model makes.
var benchQueries = []string{
	"read the contents of a file",
	"create a new issue in a repository",
	"take a screenshot of the page",
	"post a message to a channel",
	"what time is it in Tokyo",
	"list all files in a folder",
	"run a shell command",
	"search GitHub repositories",
}

func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			ix := New(Options{})
			for _, s := range replicated(n) {
				ix.SetServer(s.srv, s.entries)
			}
			if ix.Len() != n {
				b.Fatalf("Len %d, want %d", ix.Len(), n)
			}
			i := 0
			var cpu0 int64
			took := make([]time.Duration, 0, 1<<16)
			for b.Loop() {
				if i == 0 {
					cpu0 = processCPU()
				}
				began := time.Now()
				ix.Search(Query{Text: benchQueries[i%len(benchQueries)]})
				if len(took) < cap(took) {
					took = append(took, time.Since(began))
				}
				i++
			}
			reportCPU(b, cpu0, i)
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
		})
	}
}

func BenchmarkSetServer100(b *testing.B) {
	// 100 tools of one server, into an index that already holds 10,000.
	ix := New(Options{})
	for _, s := range replicated(10000) {
		ix.SetServer(s.srv, s.entries)
	}
	var tools []Entry
	for i := 0; len(tools) < 100; i++ {
		fs := fixtures[i%len(fixtures)]
		for _, t := range fs.tools {
			if len(tools) < 100 {
				tools = append(tools, Entry{Name: fmt.Sprintf("mcp__big__%s_%d", t.Name, i), Tool: t})
			}
		}
	}
	srv := Server{Name: "big", Title: "Big", Instructions: "A server with a hundred tools."}
	i := 0
	var cpu0 int64
	for b.Loop() {
		if i == 0 {
			cpu0 = processCPU()
		}
		ix.SetServer(srv, tools)
		i++
	}
	reportCPU(b, cpu0, i)
}

// reportCPU reports the process's CPU time per operation since cpu0
// (cpu-ns/op): on a machine shared with other work, wall time per
// operation (ns/op) counts the time the benchmark waited for a core.
func reportCPU(b *testing.B, cpu0 int64, n int) {
	if cpu0 > 0 && n > 0 {
		b.ReportMetric(float64(processCPU()-cpu0)/float64(n), "cpu-ns/op")
	}
}

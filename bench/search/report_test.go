package search

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// rankers are the rankers the report and the benchmark measure, the
// baseline first. Each call returns fresh, empty rankers.
func rankers() []Ranker {
	return []Ranker{NewBM25(), NewToolSearch()}
}

// TestReport prints the markdown table of every ranker's figures on the
// corpus and queries (run with -v to see it), and the queries the first
// ranker misses. It asserts only what cannot depend on ranking quality: every
// ranker returns at most Depth known ids for every query.
func TestReport(t *testing.T) {
	servers, qs := loadAll(t)
	known := map[string]bool{}
	for _, s := range servers {
		for _, tl := range s.Tools {
			known[ID(s.Name, tl.Name)] = true
		}
	}
	var names []string
	var outs [][]Outcome
	for _, r := range rankers() {
		r.Index(servers)
		o := Run(r, qs)
		for _, x := range o {
			if len(x.Got) > Depth {
				t.Errorf("%s: %s: %d results, asked for %d", r.Name(), x.Query.ID, len(x.Got), Depth)
			}
			for _, id := range x.Got {
				if !known[id] {
					t.Errorf("%s: %s: unknown id %q", r.Name(), x.Query.ID, id)
				}
			}
		}
		names = append(names, r.Name())
		outs = append(outs, o)
	}
	listBytes := 0
	for _, s := range servers {
		b, err := json.Marshal(map[string]any{"tools": s.Tools})
		if err != nil {
			t.Fatal(err)
		}
		listBytes += len(b)
	}
	t.Logf("corpus: %d servers, %d tools (tools/list results: %d bytes of JSON, about %d tokens at 4 bytes a token); %d queries\n\n%s",
		len(servers), ToolCount(servers), listBytes, listBytes/4, len(qs), Table(names, outs))
	if testing.Verbose() {
		var missed []string
		for _, o := range outs[0] {
			if o.Rank == 0 {
				missed = append(missed, fmt.Sprintf("%s (%s): %q", o.Query.ID, o.Query.Split, o.Query.Text))
			}
		}
		t.Logf("%s misses %d queries in its top %d:\n%s", names[0], len(missed), Depth, strings.Join(missed, "\n"))
	}
}

// BenchmarkSearch measures each ranker's search latency over the queries at
// 1,000 and 10,000 tools (the corpus replicated under renamed servers), and
// reports the median and 99th percentile of single searches beside the mean
// (ns/op). Indexing is outside the timed loop.
func BenchmarkSearch(b *testing.B) {
	servers, qs := loadAll(b)
	for _, size := range []int{1000, 10000} {
		corpus := Replicate(servers, size)
		for _, mk := range rankers() {
			r := mk
			r.Index(corpus)
			b.Run(fmt.Sprintf("%s/tools=%d", benchName(r.Name()), ToolCount(corpus)), func(b *testing.B) {
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					q := qs[i%len(qs)]
					start := time.Now()
					r.Search(q.Text, Depth)
					lat = append(lat, time.Since(start))
				}
				b.StopTimer()
				sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
				b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
			})
		}
	}
}

// BenchmarkIndex measures indexing the whole corpus once per ranker.
func BenchmarkIndex(b *testing.B) {
	servers, _ := loadAll(b)
	for _, mk := range rankers() {
		r := mk
		b.Run(fmt.Sprintf("%s/tools=%d", benchName(r.Name()), ToolCount(servers)), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r.Index(servers)
			}
		})
	}
}

func benchName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '(' || r == ')' || r == '+' {
			return '_'
		}
		return r
	}, s)
}

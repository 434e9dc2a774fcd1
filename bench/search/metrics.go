package search

import (
	"fmt"
	"strings"
)

// Ranker is a tool search implementation under measurement. Index is called
// once with the whole corpus before any Search; Search returns up to k tool
// ids ("server/tool", see ID), best first. A Ranker is used from one
// goroutine at a time.
type Ranker interface {
	// Name labels the ranker in reports.
	Name() string
	// Index replaces whatever was indexed by servers' tools.
	Index(servers []Server)
	// Search returns at most k ids, best first.
	Search(text string, k int) []string
}

// Depth is how many results a query asks a ranker for; ranks below it count
// as not found (MRR is MRR@Depth).
const Depth = 10

// RankOf is the 1-based position of the first id in got that is one of
// want, or 0 when none is.
func RankOf(got, want []string) int {
	for i, g := range got {
		for _, w := range want {
			if g == w {
				return i + 1
			}
		}
	}
	return 0
}

// Outcome is one query's result under one ranker.
type Outcome struct {
	Query Query
	Rank  int      // RankOf the ranker's results; 0 when not in the top Depth
	Got   []string // what the ranker returned
}

// Run asks r every query (r must already be indexed) and returns the
// outcomes in query order.
func Run(r Ranker, qs []Query) []Outcome {
	out := make([]Outcome, len(qs))
	for i, q := range qs {
		got := r.Search(q.Text, Depth)
		out[i] = Outcome{Query: q, Rank: RankOf(got, q.Want), Got: got}
	}
	return out
}

// Metrics are the figures over a set of outcomes: the share of queries whose
// wanted tool is at rank 1, in the top 5 and in the top 10, and the mean
// reciprocal rank (1/rank, 0 when not in the top Depth).
type Metrics struct {
	N                int
	Recall1, Recall5 float64
	Recall10, MRR    float64
}

// Summarize computes Metrics over the outcomes keep accepts (all when keep
// is nil). With no outcome kept every figure is 0.
func Summarize(outs []Outcome, keep func(Query) bool) Metrics {
	var m Metrics
	for _, o := range outs {
		if keep != nil && !keep(o.Query) {
			continue
		}
		m.N++
		if o.Rank == 0 {
			continue
		}
		if o.Rank <= 1 {
			m.Recall1++
		}
		if o.Rank <= 5 {
			m.Recall5++
		}
		if o.Rank <= 10 {
			m.Recall10++
		}
		m.MRR += 1 / float64(o.Rank)
	}
	if m.N > 0 {
		n := float64(m.N)
		m.Recall1 /= n
		m.Recall5 /= n
		m.Recall10 /= n
		m.MRR /= n
	}
	return m
}

// Slice is a named subset of the queries a report shows a row for.
type Slice struct {
	Name string
	Keep func(Query) bool
}

// Slices are the report's rows: all queries, each split, each kind, the
// noOverlap queries, and each split crossed with noOverlap.
var Slices = []Slice{
	{"all", nil},
	{"tune", func(q Query) bool { return q.Split == "tune" }},
	{"heldout", func(q Query) bool { return q.Split == "heldout" }},
	{"model", func(q Query) bool { return q.Kind == "model" }},
	{"user", func(q Query) bool { return q.Kind == "user" }},
	{"noOverlap", func(q Query) bool { return q.NoOverlap }},
	{"heldout model", func(q Query) bool { return q.Split == "heldout" && q.Kind == "model" }},
	{"heldout user", func(q Query) bool { return q.Split == "heldout" && q.Kind == "user" }},
	{"heldout noOverlap", func(q Query) bool { return q.Split == "heldout" && q.NoOverlap }},
}

// Table renders the figures of each ranker's outcomes (in the order given)
// for every Slice as a markdown table.
func Table(names []string, outs [][]Outcome) string {
	var b strings.Builder
	b.WriteString("| queries | n | ranker | recall@1 | recall@5 | recall@10 | MRR@10 |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|---:|\n")
	for _, s := range Slices {
		for i, name := range names {
			m := Summarize(outs[i], s.Keep)
			fmt.Fprintf(&b, "| %s | %d | %s | %.3f | %.3f | %.3f | %.3f |\n",
				s.Name, m.N, name, m.Recall1, m.Recall5, m.Recall10, m.MRR)
		}
	}
	return b.String()
}

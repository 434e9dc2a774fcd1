package search

import (
	"math"
	"strings"
	"testing"
)

func TestRankOf(t *testing.T) {
	got := []string{"a/x", "b/y", "c/z"}
	for _, c := range []struct {
		want []string
		rank int
	}{
		{[]string{"a/x"}, 1},
		{[]string{"c/z"}, 3},
		{[]string{"c/z", "b/y"}, 2}, // the first acceptable tool counts
		{[]string{"d/w"}, 0},
		{nil, 0},
	} {
		if r := RankOf(got, c.want); r != c.rank {
			t.Errorf("RankOf(%v) = %d, want %d", c.want, r, c.rank)
		}
	}
}

func TestSummarize(t *testing.T) {
	outs := []Outcome{
		{Query: Query{Split: "tune", Kind: "model"}, Rank: 1},
		{Query: Query{Split: "tune", Kind: "user"}, Rank: 3},
		{Query: Query{Split: "heldout", Kind: "user"}, Rank: 7},
		{Query: Query{Split: "heldout", Kind: "model"}, Rank: 0},
	}
	m := Summarize(outs, nil)
	want := Metrics{N: 4, Recall1: 0.25, Recall5: 0.5, Recall10: 0.75, MRR: (1 + 1.0/3 + 1.0/7) / 4}
	if m.N != want.N || !near(m.Recall1, want.Recall1) || !near(m.Recall5, want.Recall5) ||
		!near(m.Recall10, want.Recall10) || !near(m.MRR, want.MRR) {
		t.Errorf("Summarize = %+v, want %+v", m, want)
	}
	h := Summarize(outs, func(q Query) bool { return q.Split == "heldout" })
	if h.N != 2 || !near(h.Recall10, 0.5) || !near(h.MRR, 1.0/14) || h.Recall1 != 0 {
		t.Errorf("heldout = %+v", h)
	}
	if e := Summarize(outs, func(Query) bool { return false }); e != (Metrics{}) {
		t.Errorf("empty = %+v, want zero", e)
	}
	tbl := Table([]string{"r"}, [][]Outcome{outs})
	if !strings.Contains(tbl, "| all | 4 | r | 0.250 | 0.500 | 0.750 |") {
		t.Errorf("Table:\n%s", tbl)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestWords(t *testing.T) {
	got := strings.Join(Words("Read_file: get-the API's contents (v2)…ÉTÉ"), ",")
	if got != "read,file,get,the,api,s,contents,v2,été" {
		t.Errorf("Words = %s", got)
	}
}

func TestSplitForIsAboutAThird(t *testing.T) {
	held := 0
	for i := 0; i < 3000; i++ {
		if SplitFor(strings.Repeat("q", i%7)+string(rune('a'+i%26))+string(rune('0'+i%10))+string(rune(i))) == "heldout" {
			held++
		}
	}
	if held < 800 || held > 1200 {
		t.Errorf("%d of 3000 held out, want about 1000", held)
	}
}

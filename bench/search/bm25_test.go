package search

import (
	"math"
	"reflect"
	"testing"

	"github.com/mcpvisor/mcpvisor/protocol"
)

func tools(server string, nameDesc ...string) Server {
	s := Server{Name: server}
	for i := 0; i+1 < len(nameDesc); i += 2 {
		s.Tools = append(s.Tools, protocol.Tool{Name: nameDesc[i], Description: nameDesc[i+1]})
	}
	return s
}

// The baseline ranks by textbook BM25 over name and description, with no
// stemming and no camelCase splitting.
func TestBM25Ranks(t *testing.T) {
	r := NewBM25()
	r.Index([]Server{
		tools("fs", "read_file", "Read a file", "write_file", "Write a file", "listDir", "List a directory"),
		tools("web", "fetch", "Fetch a URL and read it"),
	})
	if got := r.Search("read file", 10); !reflect.DeepEqual(got, []string{"fs/read_file", "fs/write_file", "web/fetch"}) {
		t.Errorf("read file: %v", got)
	}
	if got := r.Search("reading", 10); len(got) != 0 {
		t.Errorf("no stemming: reading found %v", got)
	}
	if got := r.Search("dir", 10); len(got) != 0 {
		t.Errorf("no camelCase split: dir found %v", got)
	}
	if got := r.Search("read file", 1); len(got) != 1 {
		t.Errorf("k=1: %v", got)
	}
	if got := NewBM25().Search("x", 5); got != nil {
		t.Errorf("empty index: %v", got)
	}
}

func TestBM25Score(t *testing.T) {
	// Docs "x a b" (3 tokens) and "y a a c c" (5 tokens): average 4. For the
	// query "c": N=2, df=1, tf=2 in the second doc.
	r := NewBM25()
	r.Index([]Server{tools("s", "x", "a b", "y", "a a c c")})
	idf := math.Log(1 + (2-1+0.5)/(1+0.5))
	want := idf * 2 * (1.2 + 1) / (2 + 1.2*(1-0.75+0.75*5.0/4))
	got := r.scores("c")
	if got[0] != 0 || math.Abs(got[1]-want) > 1e-12 {
		t.Errorf("scores(c) = %v, want [0 %v]", got, want)
	}
	// "a" is in both docs: the idf stays positive (Lucene's form).
	if got := r.scores("a"); got[0] <= 0 || got[1] <= 0 {
		t.Errorf("scores(a) = %v, want both positive", got)
	}
}

// topK keeps the k best positive scores, best first, ties in index order.
func TestTopK(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e", "f"}
	scores := []float64{1, 3, 0, 3, -1, 2}
	for k, want := range map[int][]string{
		1: {"b"}, 2: {"b", "d"}, 3: {"b", "d", "f"}, 10: {"b", "d", "f", "a"},
	} {
		if got := topK(ids, scores, k); !reflect.DeepEqual(got, want) {
			t.Errorf("topK(%d) = %v, want %v", k, got, want)
		}
	}
}

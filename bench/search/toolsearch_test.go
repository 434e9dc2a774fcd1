package search

import (
	"testing"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// hundredTools is one server of 100 tools taken from the corpus, renamed
// <server>_<tool> so that names stay unique.
func hundredTools(servers []Server) Server {
	s := Server{Name: "hundred"}
	for _, srv := range servers {
		for _, t := range srv.Tools {
			if len(s.Tools) == 100 {
				return s
			}
			c := t
			c.Name = srv.Name + "_" + t.Name
			s.Tools = append(s.Tools, c)
		}
	}
	return s
}

// BenchmarkToolSearchSetServer measures toolsearch's SetServer of one
// 100-tool server into an index already holding the corpus (the cost of a
// list_changed re-index).
func BenchmarkToolSearchSetServer(b *testing.B) {
	servers, _ := loadAll(b)
	h := hundredTools(servers)
	r := NewToolSearch()
	r.Index(servers)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.setServer(h)
	}
}

// The adapter maps hits back to corpus ids and honours k.
func TestToolSearchAdapter(t *testing.T) {
	r := NewToolSearch()
	r.Index([]Server{{Name: "fs", Tools: []protocol.Tool{
		{Name: "read_file", Description: "Read a file", InputSchema: []byte(`{"type":"object"}`)},
		{Name: "write_file", Description: "Write a file", InputSchema: []byte(`{"type":"object"}`)},
	}}})
	got := r.Search("read a file", 1)
	if len(got) != 1 || got[0] != "fs/read_file" {
		t.Errorf("Search = %v, want [fs/read_file]", got)
	}
}

package search

import "github.com/mcpvisor/mcpvisor/toolsearch"

// ToolSearch measures package toolsearch, mcpvisor's ranking, through the
// Ranker interface: each server is indexed with SetServer under its corpus
// name, serverInfo.title and instructions, each tool under the pool's
// qualified name mcp__<server>__<tool>, with default Options. Nothing is
// learned (Learn is never called), no filter is set.
type ToolSearch struct {
	ix *toolsearch.Index
}

// NewToolSearch returns an empty adapter.
func NewToolSearch() *ToolSearch { return &ToolSearch{ix: toolsearch.New(toolsearch.Options{})} }

// Name implements Ranker.
func (r *ToolSearch) Name() string { return "toolsearch" }

// Index implements Ranker: a fresh index holding servers.
func (r *ToolSearch) Index(servers []Server) {
	r.ix = toolsearch.New(toolsearch.Options{})
	for _, s := range servers {
		r.setServer(s)
	}
}

func (r *ToolSearch) setServer(s Server) {
	entries := make([]toolsearch.Entry, len(s.Tools))
	for i, t := range s.Tools {
		entries[i] = toolsearch.Entry{Name: "mcp__" + s.Name + "__" + t.Name, Tool: t}
	}
	r.ix.SetServer(toolsearch.Server{Name: s.Name, Title: s.ServerInfo.Title, Instructions: s.Instructions}, entries)
}

// Search implements Ranker.
func (r *ToolSearch) Search(text string, k int) []string {
	hits := r.ix.Search(toolsearch.Query{Text: text, Limit: k})
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = ID(h.Server, h.Tool.Name)
	}
	return out
}

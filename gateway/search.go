package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcpvisor/mcpvisor"
)

// ToolMode is what tools/list offers a client: the whole pool, or a
// search tool in front of it (Options.ToolMode).
type ToolMode int

// The tool modes.
const (
	// ToolsFull lists every offered tool of the pool (the zero value);
	// a deferred server's tools are still left out, and found with the
	// search tools, which are listed too while there are such tools.
	ToolsFull ToolMode = iota
	// ToolsSearch lists, instead of the pool, the search tools (search,
	// describe, call by name), the gateway's own tools and the tools
	// Options.AlwaysOffer names.
	ToolsSearch
	// ToolsAuto is ToolsSearch while the definitions ToolsFull would list
	// exceed Options.SearchBudgetTokens (estimated, see EstimateTokens),
	// else ToolsFull.
	ToolsAuto
)

// DefaultSearchBudgetTokens is Options.SearchBudgetTokens' zero value.
const DefaultSearchBudgetTokens = 20000

// String returns full, search or auto.
func (m ToolMode) String() string {
	switch m {
	case ToolsSearch:
		return "search"
	case ToolsAuto:
		return "auto"
	}
	return "full"
}

// ParseToolMode parses full, search or auto ("" is full).
func ParseToolMode(s string) (ToolMode, bool) {
	switch s {
	case "", "full":
		return ToolsFull, true
	case "search":
		return ToolsSearch, true
	case "auto":
		return ToolsAuto, true
	}
	return ToolsFull, false
}

// The endpoints at which a client chooses its tool mode, beside MCPPath
// (where the query parameter ?tools=search|full chooses, or the
// gateway's Options.ToolMode).
const (
	MCPSearchPath = MCPPath + "/search"
	MCPFullPath   = MCPPath + "/full"
)

// isMCPPath reports whether path is an MCP endpoint (MCPPath or a
// per-mode path under it), which no Part's login admits.
func isMCPPath(path string) bool {
	return path == MCPPath || strings.HasPrefix(path, MCPPath+"/")
}

// toolModeKey is the context key of the tool mode a client chose.
type toolModeKey struct{}

// withToolMode serves h with the tool mode the request chose: mode when
// it is not ToolsAuto (the endpoint chose), else the query parameter
// tools, if any. A tools value other than search or full is answered 400.
func withToolMode(mode ToolMode, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := mode
		if q := r.URL.Query().Get("tools"); q != "" {
			qm, ok := ParseToolMode(q)
			if !ok || qm == ToolsAuto {
				httpError(w, http.StatusBadRequest, "tools: want search or full")
				return
			}
			if m == ToolsAuto {
				m = qm
			}
		}
		if m != ToolsAuto {
			r = r.WithContext(context.WithValue(r.Context(), toolModeKey{}, m))
		}
		h.ServeHTTP(w, r)
	})
}

// mountToolModes serves the MCP endpoint h at MCPPath (the query
// parameter chooses) and at the per-mode paths.
func mountToolModes(mux *http.ServeMux, h http.Handler) {
	mux.Handle(MCPPath, withToolMode(ToolsAuto, h))
	mux.Handle(MCPSearchPath, withToolMode(ToolsSearch, h))
	mux.Handle(MCPFullPath, withToolMode(ToolsFull, h))
}

// searchMode decides each client's tool mode and serves the search
// tools over the gateway's own index of the pool.
//
// Concurrency: safe for concurrent use. gen counts the pool's changes
// (Run bumps it); the auto mode's estimate is cached under mu for one
// generation; the index guards itself.
type searchMode struct {
	g      *Gateway
	budget int
	gen    atomic.Uint64

	mu        sync.Mutex
	tokensGen uint64 // the generation tokens was computed at (0: never)
	tokens    int    // estimated tokens of what ToolsFull lists

	index *searchIndex
}

func newSearchMode(g *Gateway) *searchMode {
	sm := &searchMode{g: g, budget: g.opts.SearchBudgetTokens}
	if sm.budget <= 0 {
		sm.budget = DefaultSearchBudgetTokens
	}
	sm.gen.Store(1)
	sm.index = newSearchIndex(g)
	return sm
}

// poolChanged records that the pool (or part of it) changed; called by
// Run. server is the server whose tools changed, or "" for any.
func (sm *searchMode) poolChanged(server string) {
	sm.gen.Add(1)
	sm.index.stale(server)
}

// fullTokens is the estimate of the definitions ToolsFull lists of pool,
// cached for the pool's generation.
func (sm *searchMode) fullTokens(pool []mcpvisor.Tool) int {
	gen := sm.gen.Load()
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if sm.tokensGen == gen {
		return sm.tokens
	}
	n := 0
	for _, t := range pool {
		if !t.Deferred && sm.g.gate.offered(t.Name) {
			n += EstimateTokens(t.Definition)
		}
	}
	sm.tokens, sm.tokensGen = n, gen
	return n
}

// defaultMode is the mode of a client that did not choose: ToolsAuto
// resolved against the pool.
func (sm *searchMode) defaultMode(pool []mcpvisor.Tool) ToolMode {
	switch sm.g.opts.ToolMode {
	case ToolsSearch:
		return ToolsSearch
	case ToolsAuto:
		if sm.fullTokens(pool) > sm.budget {
			return ToolsSearch
		}
	}
	return ToolsFull
}

// modeOf is the mode of the request ctx serves.
func (sm *searchMode) modeOf(ctx context.Context, pool []mcpvisor.Tool) ToolMode {
	if m, ok := ctx.Value(toolModeKey{}).(ToolMode); ok {
		return m
	}
	return sm.defaultMode(pool)
}

// String describes the search mode for logs.
func (sm *searchMode) String() string {
	return fmt.Sprintf("tools %s, budget %d", sm.g.opts.ToolMode, sm.budget)
}

package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/toolsearch"
)

// The search tools: what a client in search mode lists instead of the
// pool (and a client in full mode beside it while a deferred server has
// tools). Each answers from the gateway's own toolsearch.Index of the
// pool; call_tool hands the call to the same path as a direct tools/call.
const (
	searchToolName   = "search_tools"
	describeToolName = "describe_tools"
	callToolName     = "call_tool"
)

// Bounds of the search tools' arguments.
const (
	defaultSearchLimit = 8
	maxSearchLimit     = 50
	maxDescribe        = 20
	// shortDescription bounds the description a search hit carries.
	shortDescription = 240
	// serverLine bounds a server's one-line purpose in search_tools'
	// description.
	serverLine = 100
	// serverExamples is how many of its tools' names stand for the purpose
	// of a server that gave neither a title nor instructions.
	serverExamples = 4
)

// searchIndex is the gateway's toolsearch.Index of the pool it serves,
// kept in step with the pool one server at a time: a server is indexed
// again only when an event said its tools changed (stale) or its tools'
// fingerprint (names, sizes of descriptions and schemas) differs from
// the one indexed, which catches a change whose event has not reached
// Run yet.
//
// Concurrency: safe for concurrent use; mu guards the fingerprints and
// the stale marks and serialises sync; the index guards itself.
type searchIndex struct {
	g  *Gateway
	ix *toolsearch.Index

	mu       sync.Mutex
	indexed  map[string]uint64 // server → fingerprint of the tools indexed
	staleSet map[string]bool   // servers an event said changed
	allStale bool              // every server (a gap in the events)
	purpose  map[string]string // server → its one-line purpose, as of its indexing

	// reindexed counts the indexings of each server (for tests and
	// debugging: only a changed server is indexed again).
	reindexed map[string]int

	// last are the recent searches' text, by session, for Learn (bounded:
	// cleared when it grows past maxLearnSessions).
	last map[*mcpserver.Session]string
}

const maxLearnSessions = 1024

func newSearchIndex(g *Gateway) *searchIndex {
	return &searchIndex{g: g, ix: toolsearch.New(toolsearch.Options{}), indexed: map[string]uint64{}, staleSet: map[string]bool{},
		purpose: map[string]string{}, last: map[*mcpserver.Session]string{}, reindexed: map[string]int{}}
}

// stale marks server ("" for all) to be indexed again at the next sync.
func (si *searchIndex) stale(server string) {
	si.mu.Lock()
	defer si.mu.Unlock()
	if server == "" {
		si.allStale = true
	} else {
		si.staleSet[server] = true
	}
}

// sync brings the index in step with pool. One pass fingerprints every
// server's tools without copying them; a second collects the tools of
// the servers to index again, if any.
func (si *searchIndex) sync(pool []mcpvisor.Tool) {
	fps := map[string]uint64{}
	var order []string
	for i := range pool {
		t := &pool[i]
		if t.Builtin || t.Server == "" {
			continue
		}
		h, ok := fps[t.Server]
		if !ok {
			h = fnvOffset
			order = append(order, t.Server)
		}
		fps[t.Server] = fingerprint(h, t)
	}
	si.mu.Lock()
	defer si.mu.Unlock()
	var redo map[string][]toolsearch.Entry
	for _, name := range order {
		if old, ok := si.indexed[name]; ok && old == fps[name] && !si.allStale && !si.staleSet[name] {
			continue
		}
		if redo == nil {
			redo = map[string][]toolsearch.Entry{}
		}
		redo[name] = nil
	}
	if redo != nil {
		for i := range pool {
			t := &pool[i]
			if entries, ok := redo[t.Server]; ok && !t.Builtin {
				redo[t.Server] = append(entries, toolsearch.Entry{Name: t.Name, Tool: t.Definition})
			}
		}
		status := map[string]mcpvisor.ServerStatus{}
		for _, s := range si.g.b.Status() {
			status[s.Name] = s
		}
		for _, name := range order {
			entries, ok := redo[name]
			if !ok {
				continue
			}
			srv := toolsearch.Server{Name: name, Title: status[name].ServerInfo.Title}
			if src, ok := si.g.b.(ServerSource); ok {
				srv.Instructions = src.Server(name).Instructions()
			}
			si.ix.SetServer(srv, entries)
			si.indexed[name] = fps[name]
			si.reindexed[name]++
			si.purpose[name] = purposeOf(srv)
			delete(si.staleSet, name)
		}
	}
	for name := range si.indexed {
		if _, ok := fps[name]; !ok {
			si.ix.RemoveServer(name)
			delete(si.indexed, name)
			delete(si.purpose, name)
			delete(si.staleSet, name)
		}
	}
	si.allStale = false
}

// FNV-1a, 64 bits, inline (no allocation per tool).
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fingerprint adds to h what tells a tool apart cheaply: its name and the
// sizes of its description, schema and title.
func fingerprint(h uint64, t *mcpvisor.Tool) uint64 {
	for i := 0; i < len(t.Name); i++ {
		h = (h ^ uint64(t.Name[i])) * fnvPrime
	}
	for _, n := range [...]int{len(t.Definition.Description), len(t.Definition.InputSchema), len(t.Definition.Title)} {
		h = (h ^ uint64(n)) * fnvPrime
	}
	return h
}

// purposeOf is a server's one-line purpose: its title, else the first
// line of its instructions; "" when it gave neither.
func purposeOf(s toolsearch.Server) string {
	p := strings.TrimSpace(s.Title)
	if p == "" {
		p, _, _ = strings.Cut(strings.TrimSpace(s.Instructions), "\n")
	}
	return shorten(strings.TrimSpace(p), serverLine)
}

// shorten cuts s to at most n runes, at a word, with an ellipsis.
func shorten(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	head, _ := cutText(s, n-1)
	return strings.TrimRight(head, " \n") + "…"
}

// searchTools returns the search tools' definitions for pool: the search
// tool's description names the servers behind the gateway with their
// purpose and tool counts, so it changes when servers come or go; of
// them, only what ctx's caller may use (allowedFor: the access rules).
func (sm *searchMode) searchTools(ctx context.Context, pool []mcpvisor.Tool) []protocol.Tool {
	si := sm.index
	si.sync(pool)
	allowed := sm.g.gate.allowedFor(ctx)
	count := map[string]int{}
	examples := map[string][]string{} // a few tool names of each server, for one that says nothing of its purpose
	var servers []string
	total := 0
	for _, t := range pool {
		if t.Builtin || t.Server == "" || !allowed(t.Name) {
			continue
		}
		if count[t.Server] == 0 {
			servers = append(servers, t.Server)
		}
		count[t.Server]++
		total++
		if len(examples[t.Server]) < serverExamples {
			examples[t.Server] = append(examples[t.Server], t.Definition.Name)
		}
	}
	slices.Sort(servers)
	var b strings.Builder
	fmt.Fprintf(&b, "Finds tools among the %d tools of the %d servers behind this mcpvisor gateway, which are not listed "+
		"one by one to save context. Describe in plain words what you want to do (for example \"create an issue\", "+
		"\"read a file\", \"query the database\"); the answer lists the best matching tools, best first, each with its name, "+
		"server, a short description and its arguments (* marks a required one). Then call the tool with %s {name, arguments}; "+
		"when its arguments are not obvious, get its full input schema first with %s {names}. If nothing fits, search again "+
		"with other words or name a server. Servers:", total, len(servers), callToolName, describeToolName)
	si.mu.Lock()
	for _, s := range servers {
		fmt.Fprintf(&b, "\n- %s (%s)", s, plural(count[s], "tool"))
		if p := si.purpose[s]; p != "" {
			b.WriteString(": " + p)
		} else {
			b.WriteString(": " + strings.Join(examples[s], ", "))
			if count[s] > len(examples[s]) {
				b.WriteString(", …")
			}
		}
	}
	si.mu.Unlock()
	search := protocol.Tool{
		Name:        searchToolName,
		Title:       "Search the tools",
		Description: b.String(),
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"query":{"type":"string","description":"what you want to do, in words"},` +
			`"server":{"type":"string","description":"only this server's tools (optional)"},` +
			`"read_only":{"type":"boolean","description":"only tools that change nothing (optional)"},` +
			`"limit":{"type":"integer","minimum":1,"maximum":50,"default":8,"description":"how many tools to return"}},"required":["query"]}`),
		Annotations: &protocol.ToolAnnotations{ReadOnlyHint: ptrTrue()},
	}
	describe := protocol.Tool{
		Name:  describeToolName,
		Title: "Describe tools",
		Description: fmt.Sprintf("Returns the full definitions (description and input schema) of tools found with %s, by name "+
			"(up to %d at once), so that you can call them correctly with %s.", searchToolName, maxDescribe, callToolName),
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"names":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":20,"description":"tool names as ` + searchToolName + ` gave them"}},"required":["names"]}`),
		Annotations: &protocol.ToolAnnotations{ReadOnlyHint: ptrTrue()},
	}
	call := protocol.Tool{
		Name:  callToolName,
		Title: "Call a tool by name",
		Description: fmt.Sprintf("Calls a tool of the servers behind this gateway by the name %s gave, with its arguments "+
			"(an object that matches the tool's input schema). The answer is the tool's own result, and the call is checked, "+
			"approved and traced as a direct call would be.", searchToolName),
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"name":{"type":"string","description":"the tool's name"},` +
			`"arguments":{"type":"object","description":"the tool's arguments"}},"required":["name"]}`),
	}
	return []protocol.Tool{search, describe, call}
}

func ptrTrue() *bool { b := true; return &b }

// list is tools/list in search mode: the host's tools, the pool's
// built-in tools (management), the pool tools Options.AlwaysOffer
// names, the search tools and the gateway's own tools.
func (sm *searchMode) list(ctx context.Context, pool []mcpvisor.Tool) protocol.ListToolsResult {
	g := sm.g
	idx := g.naming.fresh(pool)
	var out []protocol.Tool
	hidden := map[string]bool{}
	for _, def := range g.features.toolList() {
		hidden[def.Name] = true
		if g.gate.offered(def.Name) {
			out = append(out, def)
		}
	}
	for _, t := range pool {
		if t.Deferred || !g.gate.offered(t.Name) { // a deferred server's tools are never listed, whatever AlwaysOffer says
			continue
		}
		name := idx.downstreamTool(t.Name)
		if hidden[name] || !(t.Builtin || sm.alwaysOffered(name, t.Name)) {
			continue
		}
		def := t.Definition
		def.Name = name
		if idx.shortened[t.Name] {
			def.Meta = withOriginal(def.Meta, t.Server, t.Definition.Name)
		}
		out = append(out, def)
	}
	out = append(out, sm.searchTools(ctx, pool)...)
	if g.chans.inbox != nil && g.gate.offered(waitToolName) {
		out = append(out, waitTool)
	}
	if g.pages.offered() {
		out = append(out, pageTool)
	}
	return protocol.ListToolsResult{Tools: out}
}

// alwaysOffered reports whether Options.AlwaysOffer names a pool tool,
// by its downstream or its qualified name.
func (sm *searchMode) alwaysOffered(downstream, qualified string) bool {
	return matchAny(sm.g.opts.AlwaysOffer, downstream) || matchAny(sm.g.opts.AlwaysOffer, qualified)
}

// deferredTools are the search tools a full-mode list adds while a
// deferred server has offered tools (they are found only by search).
func (sm *searchMode) deferredTools(ctx context.Context, pool []mcpvisor.Tool) []protocol.Tool {
	for _, t := range pool {
		if t.Deferred && sm.g.gate.offered(t.Name) {
			return sm.searchTools(ctx, pool)
		}
	}
	return nil
}

// offersSearch reports whether the client of ctx has the search tools:
// in search mode, or while a deferred server has tools.
func (sm *searchMode) offersSearch(ctx context.Context, pool []mcpvisor.Tool) bool {
	if sm.modeOf(ctx, pool) == ToolsSearch {
		return true
	}
	return slices.ContainsFunc(pool, func(t mcpvisor.Tool) bool { return t.Deferred && sm.g.gate.offered(t.Name) })
}

// call serves a tools/call of a search tool, if name is one the client
// has; ok is false otherwise (the call is the pool's).
func (sm *searchMode) call(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request, name string, args json.RawMessage) (res any, perr *protocol.Error, ok bool) {
	if name != searchToolName && name != describeToolName && name != callToolName {
		return nil, nil, false
	}
	pool := sm.g.b.Tools()
	if !sm.offersSearch(ctx, pool) {
		return nil, nil, false
	}
	switch name {
	case searchToolName:
		res, perr = sm.search(ctx, r.Session, pool, args)
	case describeToolName:
		res, perr = sm.describe(ctx, pool, args)
	default:
		res, perr = sm.callByName(ctx, w, r, args)
	}
	return res, perr, true
}

// searchArgs are search_tools' arguments.
type searchArgs struct {
	Query    string  `json:"query"`
	Server   string  `json:"server"`
	ReadOnly bool    `json:"read_only"`
	Limit    float64 `json:"limit"`
}

// searchHit is one tool of search_tools' answer.
type searchHit struct {
	Name        string `json:"name"`
	Server      string `json:"server"`
	Description string `json:"description,omitempty"`
	Arguments   string `json:"arguments,omitempty"`
}

// search serves search_tools.
func (sm *searchMode) search(ctx context.Context, s *mcpserver.Session, pool []mcpvisor.Tool, raw json.RawMessage) (any, *protocol.Error) {
	var a searchArgs
	if len(raw) == 0 || json.Unmarshal(raw, &a) != nil || strings.TrimSpace(a.Query) == "" {
		return nil, errorf(protocol.CodeInvalidParams, "%s: want {query, server?, read_only?, limit?}", searchToolName)
	}
	limit := int(a.Limit)
	if limit <= 0 {
		limit = defaultSearchLimit
	}
	limit = min(limit, maxSearchLimit)
	si := sm.index
	si.sync(pool)
	q := toolsearch.Query{Text: a.Query, Limit: limit, ReadOnly: a.ReadOnly, Allow: sm.g.gate.allowedFor(ctx)}
	if a.Server != "" {
		q.Servers = []string{a.Server}
	}
	hits := si.ix.Search(q)
	idx := sm.g.naming.fresh(pool)
	out := make([]searchHit, 0, len(hits))
	for _, h := range hits {
		out = append(out, searchHit{Name: idx.downstreamTool(h.Name), Server: h.Server,
			Description: shorten(firstParagraph(h.Tool.Description), shortDescription), Arguments: argumentSummary(h.Tool.InputSchema)})
	}
	si.remember(s, a.Query)
	var text string
	if len(out) == 0 {
		text = fmt.Sprintf("No tool matches %q. Search again with other words (what the tool does, or the thing it works on), or without a server or read_only filter.", a.Query)
	} else {
		b, _ := json.Marshal(out)
		text = string(b)
	}
	return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(text)}}, nil
}

// firstParagraph is the description up to its first blank line.
func firstParagraph(s string) string {
	p, _, _ := strings.Cut(strings.TrimSpace(s), "\n\n")
	return strings.Join(strings.Fields(p), " ")
}

// argumentSummary lists a schema's top-level properties as
// "name*: type, …" (* marks a required one).
func argumentSummary(schema json.RawMessage) string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return ""
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	slices.SortStableFunc(names, func(a, b string) int { // required first
		ra, rb := slices.Contains(s.Required, a), slices.Contains(s.Required, b)
		switch {
		case ra && !rb:
			return -1
		case rb && !ra:
			return 1
		}
		return 0
	})
	parts := make([]string, len(names))
	for i, n := range names {
		p := n
		if slices.Contains(s.Required, n) {
			p += "*"
		}
		if raw, ok, _ := protocol.RawMember(s.Properties[n], "type"); ok {
			var one string
			var many []string
			if json.Unmarshal(raw, &one) == nil {
				p += ": " + one
			} else if json.Unmarshal(raw, &many) == nil {
				p += ": " + strings.Join(many, "|")
			}
		}
		parts[i] = p
	}
	return shorten(strings.Join(parts, ", "), shortDescription)
}

// remember keeps the session's latest search text, for Learn.
func (si *searchIndex) remember(s *mcpserver.Session, text string) {
	if s == nil {
		return
	}
	si.mu.Lock()
	defer si.mu.Unlock()
	if len(si.last) >= maxLearnSessions {
		clear(si.last)
	}
	si.last[s] = text
}

// learn tells the index that the session called the pool tool qualified
// after its latest search.
func (si *searchIndex) learn(s *mcpserver.Session, qualified string) {
	if s == nil {
		return
	}
	si.mu.Lock()
	text, ok := si.last[s]
	si.mu.Unlock()
	if ok {
		si.ix.Learn(text, qualified)
	}
}

// describe serves describe_tools: the full definitions of the named
// tools the client may call, under their downstream names.
func (sm *searchMode) describe(ctx context.Context, pool []mcpvisor.Tool, raw json.RawMessage) (any, *protocol.Error) {
	var a struct {
		Names []string `json:"names"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &a) != nil || len(a.Names) == 0 {
		return nil, errorf(protocol.CodeInvalidParams, "%s: want {names: [tool names]}", describeToolName)
	}
	if len(a.Names) > maxDescribe {
		return nil, errorf(protocol.CodeInvalidParams, "%s: at most %d names at once", describeToolName, maxDescribe)
	}
	idx := sm.g.naming.fresh(pool)
	allowed := sm.g.gate.allowedFor(ctx)
	byName := make(map[string]mcpvisor.Tool, len(pool))
	for _, t := range pool {
		byName[t.Name] = t
	}
	var defs []protocol.Tool
	var unknown []string
	for _, n := range a.Names {
		q := sm.g.naming.qualifiedTool(n)
		t, ok := byName[q]
		if !ok || !allowed(q) {
			unknown = append(unknown, n)
			continue
		}
		def := t.Definition
		def.Name = idx.downstreamTool(q)
		def.Meta = nil
		defs = append(defs, def)
	}
	b, _ := json.Marshal(defs)
	content := []protocol.Content{protocol.TextContent(string(b))}
	if len(unknown) > 0 {
		content = append(content, protocol.TextContent(fmt.Sprintf("No tool is named %s; find names with %s.", strings.Join(unknown, ", "), searchToolName)))
	}
	return &protocol.CallToolResult{Content: content, IsError: len(defs) == 0}, nil
}

// callByName serves call_tool: the request is served again as a direct
// tools/call of the named tool with the arguments (its _meta, and the
// stateless era's inputResponses and requestState, kept), through the
// same path: permissions, approval, pins, progress, cancellation, the
// result's bound and the typed errors are a direct call's.
func (sm *searchMode) callByName(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request, raw json.RawMessage) (any, *protocol.Error) {
	var a struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &a) != nil || a.Name == "" {
		return nil, errorf(protocol.CodeInvalidParams, "%s: want {name, arguments}", callToolName)
	}
	switch a.Name {
	case searchToolName, describeToolName, callToolName:
		return nil, errorf(protocol.CodeInvalidParams, "%s: call %s directly", callToolName, a.Name)
	}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(r.Params, &params); err != nil {
		return nil, errorf(protocol.CodeInvalidParams, "tools/call: %v", err)
	}
	params["name"], _ = json.Marshal(a.Name)
	if len(a.Arguments) == 0 || string(a.Arguments) == "null" {
		delete(params, "arguments")
	} else {
		params["arguments"] = a.Arguments
	}
	inner := *r
	inner.Params, _ = json.Marshal(params)
	// The caller's access rules and rate limit, as for a direct call
	// (Gateway.serve admits tools/call of call_tool itself without them).
	release, perr := sm.g.gate.admit(ctx, protocol.MethodToolsCall, inner.Params)
	if perr != nil {
		return nil, perr
	}
	defer release()
	res, perr := sm.g.router.callTool(ctx, w, &inner)
	if perr == nil {
		sm.index.learn(r.Session, sm.g.naming.qualifiedTool(a.Name))
	}
	return res, perr
}

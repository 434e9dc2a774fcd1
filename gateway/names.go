package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// NameStyle is how the gateway names the pool's tools and prompts
// downstream. Whatever the style, a call may also name a tool by its
// pool name (mcp__<server>__<tool>), as hosts configured before the
// style changed do.
type NameStyle string

const (
	// NamesShort (the zero value, also "short") offers <server>__<tool>:
	// the pool's name without its mcp__, which is redundant behind a
	// client that adds its own prefix (Claude Code offers a tool of a
	// server it calls "gw" as mcp__gw__<name>). A name longer than the
	// budget (Options.NameBudget) is cut and ends in '_' and eight hex
	// digits of a hash of the server's and the tool's names: the same on
	// every start and every cluster member, and different from every
	// other name offered; its definition's _meta names the original
	// (MetaOriginalName).
	NamesShort NameStyle = "short"
	// NamesQualified offers the pool's own names, mcp__<server>__<tool>
	// (at most 64 characters).
	NamesQualified NameStyle = "qualified"
	// NamesBare offers each tool and prompt under the server's own name
	// when no other server offers one by that name (else under its pool
	// name), for hosts that qualify names themselves or front a single
	// server.
	NamesBare NameStyle = "bare"
)

// DefaultNameBudget is the longest name NamesShort offers by default:
// model APIs take tool names of at most 64 characters
// (^[a-zA-Z0-9_-]{1,64}$) and refuse a whole request with a longer one;
// 48 leaves 16 for the prefix a client adds (mcp__<name>__ for a server
// name of up to 9 characters).
const DefaultNameBudget = 48

// minNameBudget is the smallest budget honoured: room for a few
// characters of the name before the '_' and the hash.
const minNameBudget = 16

// MetaOriginalName is the _meta key of a shortened tool's or prompt's
// definition that names what was shortened: {"server": …, "name": …},
// the server's and the tool's (or prompt's) own names.
const MetaOriginalName = "io.mcpvisor/original"

// ParseNameStyle returns the style named s ("" is NamesShort).
func ParseNameStyle(s string) (NameStyle, bool) {
	switch NameStyle(s) {
	case "", NamesShort:
		return NamesShort, true
	case NamesQualified, NamesBare:
		return NameStyle(s), true
	}
	return "", false
}

// shortNames fills idx for NamesShort: every server tool and prompt gets
// its short name, cut to the budget where longer. The gateway's own
// tools keep their names, and no short name equals another entry's pool
// name, so that a call by either name reaches one tool.
func (n *namer) shortNames(idx *nameIndex, tools []mcpvisor.Tool, prompts []mcpvisor.Prompt) {
	budget := max(n.budget, 0)
	if budget == 0 {
		budget = DefaultNameBudget
	}
	budget = max(budget, minNameBudget)
	taken := map[string]bool{waitToolName: true}
	for _, t := range tools {
		taken[t.Name] = true
	}
	// The pool lists tools sorted by name; sort anyway, so that the same
	// pool always gives the same names whatever the order.
	sorted := slices.Clone(tools)
	slices.SortFunc(sorted, func(a, b mcpvisor.Tool) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range sorted {
		if t.Builtin || t.Server == "" {
			continue
		}
		n, cut := shortName(t.Server, t.Definition.Name, budget, taken)
		taken[n] = true
		idx.toolOut[t.Name], idx.toolIn[n] = n, t.Name
		if cut {
			idx.shortened[t.Name] = true
		}
	}
	prompts = slices.Clone(prompts)
	ptaken := map[string]bool{}
	for _, p := range prompts {
		ptaken[p.Name] = true
	}
	slices.SortFunc(prompts, func(a, b mcpvisor.Prompt) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range prompts {
		n, cut := shortName(p.Server, p.Prompt.Name, budget, ptaken)
		ptaken[n] = true
		idx.promptOut[p.Name], idx.promptIn[n] = n, p.Name
		if cut {
			idx.shortened[p.Name] = true
		}
	}
}

// shortName returns the short name of a server's tool or prompt, and
// whether it had to be cut: <server>__<name> (characters outside
// [A-Za-z0-9_-] replaced by '_') when that fits budget and is not
// taken; else a cut of both parts that keeps the name whole where it can
// (it is what a model reads; the server's part keeps at least eight
// characters), followed by '_' and a hash of (server, name) — rehashed
// while the result is taken.
func shortName(server, name string, budget int, taken map[string]bool) (string, bool) {
	s, n := nameChars(server), nameChars(name)
	if full := s + "__" + n; len(full) <= budget && !taken[full] {
		return full, false
	}
	for round := 0; ; round++ {
		suffix := nameHash(server, name, round)
		room := budget - len(suffix) - 1 // for <s>__<n>
		nKeep := min(len(n), max(room-2-min(len(s), 8), 1))
		sKeep := min(len(s), max(room-2-nKeep, 1))
		cut := s[:sKeep] + "__" + n[:nKeep] + "_" + suffix
		if !taken[cut] {
			return cut, true
		}
	}
}

// nameChars replaces every character of s outside [A-Za-z0-9_-] by '_',
// as the pool does in its names.
func nameChars(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, s)
}

// nameHash is eight hex digits identifying (server, name); each round
// gives another.
func nameHash(server, name string, round int) string {
	h := sha256.New()
	h.Write([]byte(server))
	h.Write([]byte{0})
	h.Write([]byte(name))
	if round > 0 {
		h.Write([]byte{0})
		h.Write([]byte(strconv.Itoa(round)))
	}
	return hex.EncodeToString(h.Sum(nil)[:4])
}

// withOriginal returns m with MetaOriginalName set to server and name,
// without changing m (the pool's definitions are shared).
func withOriginal(m protocol.Meta, server, name string) protocol.Meta {
	out := make(protocol.Meta, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out[MetaOriginalName], _ = json.Marshal(map[string]string{"server": server, "name": name})
	return out
}

// nameIndex maps pool names (qualified) to what downstream sees and back.
type nameIndex struct {
	server    map[string]string // qualified tool name → server
	toolOut   map[string]string // qualified → downstream, where they differ
	toolIn    map[string]string // downstream → qualified, where they differ
	promptOut map[string]string
	promptIn  map[string]string
	// prompts holds the pool names of the prompts indexed.
	prompts map[string]bool
	// shortened holds the qualified names whose downstream name was cut
	// to the budget (their definition carries the original in _meta).
	shortened map[string]bool
	// params holds the x-mcp-header annotations of the tools that have
	// some, by qualified name (see headers.go).
	params map[string][]paramHeader
}

// namer maps names between the pool and downstream: it keeps the name
// index, dropped when the pool changes (reset) and rebuilt on demand.
//
// Concurrency: safe for concurrent use; index is an atomic pointer to an
// index never modified once stored (two rebuilds may race: either wins,
// both are right).
type namer struct {
	b      Backend
	style  NameStyle
	budget int
	index  atomic.Pointer[nameIndex]
}

// reset drops the index after a change of the pool.
func (n *namer) reset() { n.index.Store(nil) }

// current returns the current index, rebuilding it after a pool change.
func (n *namer) current() *nameIndex {
	if idx := n.index.Load(); idx != nil {
		return idx
	}
	idx := &nameIndex{server: map[string]string{}, toolOut: map[string]string{}, toolIn: map[string]string{},
		promptOut: map[string]string{}, promptIn: map[string]string{}, prompts: map[string]bool{}, shortened: map[string]bool{},
		params: map[string][]paramHeader{}}
	tools := n.b.Tools()
	count := map[string]int{}
	for _, t := range tools {
		idx.server[t.Name] = t.Server
		count[t.Definition.Name]++
		if ph := paramHeadersOf(t.Definition.InputSchema); ph != nil {
			idx.params[t.Name] = ph
		}
	}
	prompts := listPrompts(n.b)
	for _, p := range prompts {
		idx.prompts[p.Name] = true
	}
	switch n.style {
	case NamesQualified:
	case NamesBare:
		bareNames(idx, tools, prompts, count)
	default:
		n.shortNames(idx, tools, prompts)
	}
	n.index.Store(idx)
	return idx
}

// bareNames maps every tool and prompt whose own name no other server
// offers to that name (NamesBare).
func bareNames(idx *nameIndex, tools []mcpvisor.Tool, prompts []mcpvisor.Prompt, count map[string]int) {
	for _, t := range tools {
		if t.Builtin || count[t.Definition.Name] != 1 || t.Definition.Name == waitToolName {
			continue
		}
		if _, clash := idx.server[t.Definition.Name]; clash && t.Definition.Name != t.Name {
			continue // another entry's qualified name
		}
		idx.toolOut[t.Name], idx.toolIn[t.Definition.Name] = t.Definition.Name, t.Name
	}
	pcount := map[string]int{}
	for _, p := range prompts {
		pcount[p.Prompt.Name]++
	}
	for _, p := range prompts {
		if pcount[p.Prompt.Name] == 1 {
			idx.promptOut[p.Name], idx.promptIn[p.Prompt.Name] = p.Prompt.Name, p.Name
		}
	}
}

// fresh returns the name index, rebuilt first when tools (read
// from the pool) holds a tool the index has not seen: the pool can
// change before the event that drops the index reaches Run, and a tool
// missing from the index would be offered under its pool name.
func (n *namer) fresh(tools []mcpvisor.Tool) *nameIndex {
	idx := n.current()
	for _, t := range tools {
		if _, ok := idx.server[t.Name]; !ok {
			n.index.Store(nil)
			return n.current()
		}
	}
	return idx
}

// toolName returns the downstream name of a pool tool.
func (n *namer) toolName(t mcpvisor.Tool) string {
	return n.fresh([]mcpvisor.Tool{t}).downstreamTool(t.Name)
}

// downstreamTool returns the downstream name of the pool tool named
// qualified.
func (idx *nameIndex) downstreamTool(qualified string) string {
	if n, ok := idx.toolOut[qualified]; ok {
		return n
	}
	return qualified
}

// qualifiedTool maps a downstream tool name (or a pool name) to the
// pool's name.
func (n *namer) qualifiedTool(name string) string {
	idx := n.current()
	if q, ok := idx.toolIn[name]; ok {
		return q
	}
	if _, ok := idx.server[name]; ok {
		return name // a pool name
	}
	// A name the index does not know may be of a tool added since.
	if q, ok := n.fresh(n.b.Tools()).toolIn[name]; ok {
		return q
	}
	return name
}

// serverOfTool returns the server behind a qualified tool name, for
// metrics.
func (n *namer) serverOfTool(name string) string {
	if s, ok := n.current().server[name]; ok {
		return s
	}
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		if i := strings.Index(rest, "__"); i > 0 {
			return rest[:i]
		}
	}
	return ""
}

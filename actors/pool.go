package actors

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// pool is an immutable snapshot of everything offered to the host: the
// host's built-ins and what the servers offer, built by the registry and
// read by callers without a mailbox hop.
type pool struct {
	builtins      []Tool // the host's built-ins, sorted by name
	builtinByName map[string]*BuiltinTool
	tools         []Tool // MCP tools, sorted by qualified name
	toolsByName   map[string]poolEntry
	prompts       []Prompt // sorted by qualified name
	promptsByName map[string]poolEntry
	resources     []Resource         // sorted by server, then URI
	templates     []ResourceTemplate // sorted by server, then URI template
	// hiddenTools routes the qualified names of the tools a server not
	// offering them (parked, or trying to connect again after it was
	// parked) listed when last connected: not in the pool, but a call by
	// name wakes the server or waits for it.
	hiddenTools map[string]poolEntry
	// off holds the servers the host toggled off; offRoutes maps the
	// qualified names of their tools and prompts to them, so that a call
	// to one is refused with ErrServerOff rather than reported unknown.
	off       map[string]bool
	offRoutes map[string]string
	// collisions are the renames this pool made, in the order made.
	collisions []Collision
	// renamed remembers the names collisions gave (kind, server,
	// original → name), also for servers no longer offering them, so that
	// a parked or toggled-off server's tools are still routed, or refused,
	// under the name the model knows.
	renamed map[renameKey]string
	// offered counts each server's tools in the pool.
	offered map[string]int
	// views are the server views the pool was built from.
	views map[*serverHandle]*serverView
}

type renameKey struct{ kind, server, original string }

// knownName is the name server's entry original was last offered under.
func (p *pool) knownName(kind, server, original string) string {
	if name, ok := p.renamed[renameKey{kind, server, original}]; ok {
		return name
	}
	return QualifiedName(server, original)
}

// poolEntry routes a qualified name to its server and the server's own
// name for the tool or prompt.
type poolEntry struct {
	h    *serverHandle
	name string
	// replayable: the server is trusted and the tool's annotations say
	// read-only and idempotent, so a call lost with its connection may be
	// sent again (Options.ReplayIdempotent).
	replayable bool
}

var emptyPool = &pool{
	builtinByName: map[string]*BuiltinTool{}, toolsByName: map[string]poolEntry{}, promptsByName: map[string]poolEntry{},
	hiddenTools: map[string]poolEntry{}, off: map[string]bool{}, offRoutes: map[string]string{},
}

// MaxNameLength is the longest qualified name the pool offers: the limit
// model APIs put on tool names.
const MaxNameLength = 64

// QualifiedName returns the name under which a server's tool (or prompt)
// is offered: mcp__<server>__<name>, with every character outside
// [A-Za-z0-9_-] replaced by '_'. A name longer than MaxNameLength is cut
// and ends in '_' and eight hex digits of a hash of the server's and the
// tool's own names, so that it stays the same from run to run and differs
// from the shortened names of other tools. (The pool may still rename a
// tool whose name another claimed first; see Collision.)
func QualifiedName(server, name string) string {
	q := fullName(server, name)
	if len(q) <= MaxNameLength {
		return q
	}
	return withSuffix(q, nameHash(server, name, 0))
}

func fullName(server, name string) string {
	return "mcp__" + sanitize(server) + "__" + sanitize(name)
}

// withSuffix cuts q so that q + "_" + suffix fits MaxNameLength, and
// appends it. q is ASCII (sanitized), so any cut is a character boundary.
func withSuffix(q, suffix string) string {
	if keep := MaxNameLength - len(suffix) - 1; len(q) > keep {
		q = q[:keep]
	}
	return q + "_" + suffix
}

// nameHash is eight hex digits identifying (server, name); round n > 0
// gives another, for a name whose first choice was taken.
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

func sanitize(s string) string {
	ok := true
	for i := 0; i < len(s); i++ {
		if !nameChar(s[i]) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r < 0x80 && nameChar(byte(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func nameChar(c byte) bool {
	return c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// namer hands out unique qualified names of one kind (tools or prompts)
// for one pool. Claims come in a fixed order (built-ins, then servers by
// name, then each server's entries by their own name), so the same
// configuration always yields the same names.
type namer struct {
	kind       string
	holders    map[string]string // name → "server/original" or "built-in"
	collisions []Collision
}

func newNamer(kind string) *namer {
	return &namer{kind: kind, holders: map[string]string{}}
}

// claim returns the name of server's entry original: its QualifiedName
// unless someone holds that, else a renamed one (recorded as a
// collision).
func (n *namer) claim(server, original string) string {
	q := QualifiedName(server, original)
	holder, taken := n.holders[q]
	if !taken {
		n.holders[q] = server + "/" + original
		return q
	}
	base := fullName(server, original)
	for round := 1; ; round++ {
		alt := withSuffix(base, nameHash(server, original, round))
		if _, taken := n.holders[alt]; !taken {
			n.holders[alt] = server + "/" + original
			n.collisions = append(n.collisions, Collision{Kind: n.kind, Name: q, Holder: holder, Server: server, Original: original, Renamed: alt})
			return alt
		}
	}
}

// allowed applies a server's tool filter to one of its tool names.
func (f *ToolFilter) allowed(name string) bool {
	for _, p := range f.Deny {
		if ok, _ := path.Match(p, name); ok {
			return false
		}
	}
	if len(f.Allow) == 0 {
		return true
	}
	for _, p := range f.Allow {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// capDescription cuts s to at most limit bytes (on a character boundary,
// ending in "…"); limit ≤ 0 means no cap.
func capDescription(s string, limit int) string {
	const ellipsis = "…"
	if limit <= 0 || len(s) <= limit {
		return s
	}
	cut := max(limit-len(ellipsis), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// poolServer is one configured server as the pool sees it.
type poolServer struct {
	name string
	h    *serverHandle
	off  bool // toggled off by the host
}

// buildPool assembles the pool from the servers (in any order) and the
// host's built-ins. Names are handed out by a namer, so collisions
// resolve the same way whatever order the servers became ready in: a
// built-in keeps its name, then the server first by name, then the tool
// first by its own name.
// prev, the pool this one replaces (nil for the first), supplies the names
// of the entries of servers not offering them.
func buildPool(servers []poolServer, builtins []BuiltinTool, maxDescription int, prev *pool) *pool {
	if prev == nil {
		prev = emptyPool
	}
	slices.SortFunc(servers, func(a, b poolServer) int { return strings.Compare(a.name, b.name) })
	p := &pool{
		builtinByName: map[string]*BuiltinTool{}, toolsByName: map[string]poolEntry{}, promptsByName: map[string]poolEntry{},
		hiddenTools: map[string]poolEntry{}, off: map[string]bool{}, offRoutes: map[string]string{},
		views: make(map[*serverHandle]*serverView, len(servers)), offered: map[string]int{}, renamed: map[renameKey]string{},
	}
	// known is the name of an entry of a server not offering it now, which
	// stays remembered for the next pool.
	known := func(kind, server, original string) string {
		name := prev.knownName(kind, server, original)
		if name != QualifiedName(server, original) {
			p.renamed[renameKey{kind, server, original}] = name
		}
		return name
	}
	tools, prompts := newNamer("tool"), newNamer("prompt")
	for i := range builtins {
		b := &builtins[i]
		p.builtinByName[b.Definition.Name] = b
		tools.holders[b.Definition.Name] = "built-in"
		p.builtins = append(p.builtins, Tool{Name: b.Definition.Name, Builtin: true, Definition: b.Definition})
	}
	for _, s := range servers {
		v := s.h.view.Load()
		if v == nil {
			continue
		}
		p.views[s.h] = v
		if s.off {
			p.off[s.name] = true
			for _, t := range v.lists.tools {
				p.offRoutes[known("tool", s.name, t.Name)] = s.name
			}
			for _, pr := range v.lists.prompts {
				p.offRoutes[known("prompt", s.name, pr.Name)] = s.name
			}
			continue
		}
		trusted := v.cfg.Trust == "trusted"
		if v.routesHiddenTools() {
			for _, t := range v.lists.tools {
				if v.cfg.Tools.allowed(t.Name) {
					p.hiddenTools[known("tool", s.name, t.Name)] = poolEntry{h: s.h, name: t.Name, replayable: trusted && readOnlyAndIdempotent(t)}
				}
			}
		}
		if !v.offersTools() {
			continue
		}
		for _, t := range sortedBy(v.lists.tools, func(t protocol.Tool) string { return t.Name }) {
			if !v.cfg.Tools.allowed(t.Name) {
				continue
			}
			q := tools.claim(s.name, t.Name)
			t.Description = capDescription(t.Description, maxDescription)
			p.toolsByName[q] = poolEntry{h: s.h, name: t.Name, replayable: trusted && readOnlyAndIdempotent(t)}
			p.tools = append(p.tools, Tool{Name: q, Server: s.name, Trusted: trusted, Definition: t})
			p.offered[s.name]++
		}
		for _, pr := range sortedBy(v.lists.prompts, func(p protocol.Prompt) string { return p.Name }) {
			q := prompts.claim(s.name, pr.Name)
			pr.Description = capDescription(pr.Description, maxDescription)
			p.promptsByName[q] = poolEntry{h: s.h, name: pr.Name}
			p.prompts = append(p.prompts, Prompt{Name: q, Server: s.name, Prompt: pr})
		}
		for _, r := range sortedBy(v.lists.resources, func(r protocol.Resource) string { return r.URI }) {
			p.resources = append(p.resources, Resource{Server: s.name, Resource: r})
		}
		for _, t := range sortedBy(v.lists.templates, func(t protocol.ResourceTemplate) string { return t.URITemplate }) {
			p.templates = append(p.templates, ResourceTemplate{Server: s.name, Template: t})
		}
	}
	slices.SortFunc(p.builtins, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(p.tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(p.prompts, func(a, b Prompt) int { return strings.Compare(a.Name, b.Name) })
	p.collisions = append(tools.collisions, prompts.collisions...)
	for _, c := range p.collisions {
		p.renamed[renameKey{c.Kind, c.Server, c.Original}] = c.Renamed
	}
	return p
}

// sortedBy returns list sorted by key, copying it only when it is not
// sorted already (servers usually list in a stable order).
func sortedBy[T any](list []T, key func(T) string) []T {
	if slices.IsSortedFunc(list, func(a, b T) int { return strings.Compare(key(a), key(b)) }) {
		return list
	}
	out := slices.Clone(list)
	slices.SortStableFunc(out, func(a, b T) int { return strings.Compare(key(a), key(b)) })
	return out
}

// readOnlyAndIdempotent reports whether a tool's annotations say both
// readOnlyHint and idempotentHint.
func readOnlyAndIdempotent(t protocol.Tool) bool {
	a := t.Annotations
	return a != nil && a.ReadOnlyHint != nil && *a.ReadOnlyHint && a.IdempotentHint != nil && *a.IdempotentHint
}

// poolItem is one entry of a pool list, for diffing: the server offering
// it, its pool name, and what a change of it means.
type poolItem struct {
	server, name string
	def          any
}

// diffPools returns the events that tell subscribers how the pool changed
// from old to p: per server and kind, one *_changed event with its diff
// (servers in name order; tools, then prompts, then resources), then one
// collision event per rename that old did not make.
func diffPools(old, p *pool) []Event {
	toolItems := func(p *pool) []poolItem {
		out := make([]poolItem, len(p.tools))
		for i, t := range p.tools {
			out[i] = poolItem{t.Server, t.Name, t.Definition}
		}
		return out
	}
	promptItems := func(p *pool) []poolItem {
		out := make([]poolItem, len(p.prompts))
		for i, pr := range p.prompts {
			out[i] = poolItem{pr.Server, pr.Name, pr.Prompt}
		}
		return out
	}
	resourceItems := func(p *pool) []poolItem {
		out := make([]poolItem, 0, len(p.resources)+len(p.templates))
		for _, r := range p.resources {
			out = append(out, poolItem{r.Server, r.Resource.URI, r.Resource})
		}
		for _, t := range p.templates {
			out = append(out, poolItem{t.Server, t.Template.URITemplate, t.Template})
		}
		return out
	}
	tools := diffItems(toolItems(old), toolItems(p))
	prompts := diffItems(promptItems(old), promptItems(p))
	resources := diffItems(resourceItems(old), resourceItems(p))
	servers := map[string]bool{}
	for _, m := range []map[string]*ListDiff{tools, prompts, resources} {
		for s := range m {
			servers[s] = true
		}
	}
	var evs []Event
	for _, s := range slices.Sorted(maps.Keys(servers)) {
		if d := tools[s]; d != nil {
			evs = append(evs, Event{Type: EventToolsChanged, Server: s, Diff: d, Tools: len(p.tools)})
		}
		if d := prompts[s]; d != nil {
			evs = append(evs, Event{Type: EventPromptsChanged, Server: s, Diff: d})
		}
		if d := resources[s]; d != nil {
			evs = append(evs, Event{Type: EventResourcesChanged, Server: s, Diff: d})
		}
	}
	seen := map[Collision]bool{}
	for _, c := range old.collisions {
		seen[c] = true
	}
	for _, c := range p.collisions {
		if !seen[c] {
			evs = append(evs, Event{Type: EventCollision, Server: c.Server, Collision: &c})
		}
	}
	return evs
}

// diffItems compares two lists by (server, name) and returns the non-empty
// diffs by server, each slice sorted.
func diffItems(old, cur []poolItem) map[string]*ListDiff {
	type key struct{ server, name string }
	before := make(map[key]any, len(old))
	for _, it := range old {
		before[key{it.server, it.name}] = it.def
	}
	diffs := map[string]*ListDiff{}
	diff := func(server string) *ListDiff {
		d := diffs[server]
		if d == nil {
			d = &ListDiff{}
			diffs[server] = d
		}
		return d
	}
	for _, it := range cur {
		k := key{it.server, it.name}
		prev, existed := before[k]
		switch {
		case !existed:
			diff(it.server).Added = append(diff(it.server).Added, it.name)
		case !reflect.DeepEqual(prev, it.def):
			diff(it.server).Changed = append(diff(it.server).Changed, it.name)
		}
		delete(before, k)
	}
	for k := range before {
		diff(k.server).Removed = append(diff(k.server).Removed, k.name)
	}
	for _, d := range diffs {
		slices.Sort(d.Added)
		slices.Sort(d.Removed)
		slices.Sort(d.Changed)
	}
	return diffs
}

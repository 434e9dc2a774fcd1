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
	tools         []*Tool // MCP tools, sorted by qualified name; shared with the offers (and other pools): read-only
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
	// views are the server views the pool was built from, each with the
	// offer it made (nil unless it offered its lists). Offers live here,
	// in the immutable pool, not on the views: the next pool reuses an
	// offer whose view's lists and settings did not change.
	views map[*serverHandle]pooledView
	// parts are the servers the pool was built from, for nextPool to tell
	// which changed; builtinsFrom and maxDescription the rest of its input.
	parts          map[*serverHandle]poolServer
	builtinsFrom   []BuiltinTool
	maxDescription int
	// contested is set when two servers routed the same hidden or
	// toggled-off name (the later one won), which only a whole build
	// reproduces.
	contested bool
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
	holders    map[string]holder // name → who claimed it
	collisions []Collision
}

func newNamer(kind string, size int) *namer {
	return &namer{kind: kind, holders: make(map[string]holder, size)}
}

// holder is who claimed a name: a server's entry, or a built-in (server
// empty).
type holder struct{ server, original string }

func (h holder) String() string {
	if h.server == "" {
		return "built-in"
	}
	return h.server + "/" + h.original
}

// claim returns the name of server's entry original: its QualifiedName
// unless someone holds that, else a renamed one (recorded as a
// collision).
func (n *namer) claim(server, original string) string {
	return n.claimPreferred(server, original, QualifiedName(server, original))
}

// claimPreferred is claim with QualifiedName(server, original) already
// computed.
func (n *namer) claimPreferred(server, original, q string) string {
	held, taken := n.holders[q]
	if !taken {
		n.holders[q] = holder{server, original}
		return q
	}
	base := fullName(server, original)
	for round := 1; ; round++ {
		alt := withSuffix(base, nameHash(server, original, round))
		if _, taken := n.holders[alt]; !taken {
			n.holders[alt] = holder{server, original}
			n.collisions = append(n.collisions, Collision{Kind: n.kind, Name: q, Holder: held.String(), Server: server, Original: original, Renamed: alt})
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

// offer is what one server view puts in the pool when it offers its
// lists: the allowed tools, prompts, resources and templates, sorted by
// their own names, descriptions capped, with each tool's preferred
// qualified name. Views are immutable and a new view usually keeps its
// predecessor's lists, so an offer is computed once per listing and
// shared by the views that follow; buildPool then only claims names and
// diffPools compares definitions only of servers whose offer changed.
//
// Offers are built by the registry goroutine and kept by the pool that
// used them (pool.views); a published offer is never modified.
type offer struct {
	// from identifies what the offer was computed from.
	from      offerSource
	tools     []offeredTool
	prompts   []Prompt // Name: the preferred qualified name, QualifiedName(server, Prompt.Name)
	resources []Resource
	templates []ResourceTemplate
}

type offeredTool struct {
	tool       Tool // Name: QualifiedName(server, Definition.Name); description capped
	replayable bool
}

// offerSource is what an offer depends on: the lists (by identity: a view
// that relisted has new slices), the filter and trust, and the cap.
type offerSource struct {
	tools          *protocol.Tool
	nTools         int
	prompts        *protocol.Prompt
	nPrompts       int
	resources      *protocol.Resource
	nResources     int
	templates      *protocol.ResourceTemplate
	nTemplates     int
	filter         *ToolFilter
	trust          string
	maxDescription int
	pins           *toolPins
}

func first[T any](list []T) *T {
	if len(list) == 0 {
		return nil
	}
	return &list[0]
}

func sourceOf(v *serverView, maxDescription int) offerSource {
	return offerSource{
		tools: first(v.lists.tools), nTools: len(v.lists.tools),
		prompts: first(v.lists.prompts), nPrompts: len(v.lists.prompts),
		resources: first(v.lists.resources), nResources: len(v.lists.resources),
		templates: first(v.lists.templates), nTemplates: len(v.lists.templates),
		filter: &v.cfg.Tools, trust: v.cfg.Trust, maxDescription: maxDescription, pins: v.lists.pins,
	}
}

// pooledView is a server view as a pool used it: the view and its offer.
type pooledView struct {
	view  *serverView
	offer *offer // nil unless the view offered its lists
}

// offerOf returns v's offer, reusing prev's (the same server as the
// previous pool used it) when it was computed from the same lists and
// settings.
func offerOf(name string, v *serverView, prev pooledView, maxDescription int) *offer {
	src := sourceOf(v, maxDescription)
	if prev.offer != nil && prev.offer.from.same(src, prev.view, v) {
		return prev.offer
	}
	// Each list is as long as the server's (the filter aside): an offer
	// lives as long as its server's lists, and append's spare capacity
	// would be paid by every idle server.
	o := &offer{from: src,
		tools:     make([]offeredTool, 0, len(v.lists.tools)),
		prompts:   make([]Prompt, 0, len(v.lists.prompts)),
		resources: make([]Resource, 0, len(v.lists.resources)),
		templates: make([]ResourceTemplate, 0, len(v.lists.templates)),
	}
	trusted := v.cfg.Trust == "trusted"
	for _, t := range sortedBy(v.lists.tools, func(t protocol.Tool) string { return t.Name }) {
		if !v.cfg.Tools.allowed(t.Name) || v.withheld(t.Name) {
			continue
		}
		t.Description = capDescription(t.Description, maxDescription)
		o.tools = append(o.tools, offeredTool{
			tool:       Tool{Name: QualifiedName(name, t.Name), Server: name, Trusted: trusted, Definition: t},
			replayable: trusted && readOnlyAndIdempotent(t),
		})
	}
	for _, pr := range sortedBy(v.lists.prompts, func(p protocol.Prompt) string { return p.Name }) {
		pr.Description = capDescription(pr.Description, maxDescription)
		o.prompts = append(o.prompts, Prompt{Name: QualifiedName(name, pr.Name), Server: name, Prompt: pr})
	}
	for _, r := range sortedBy(v.lists.resources, func(r protocol.Resource) string { return r.URI }) {
		o.resources = append(o.resources, Resource{Server: name, Resource: r})
	}
	for _, t := range sortedBy(v.lists.templates, func(t protocol.ResourceTemplate) string { return t.URITemplate }) {
		o.templates = append(o.templates, ResourceTemplate{Server: name, Template: t})
	}
	return o
}

// same reports whether an offer computed from src (for view was) serves
// cur, whose source is s: the same lists, and an equal filter and trust.
func (src offerSource) same(s offerSource, was, cur *serverView) bool {
	a, b := src, s
	a.filter, b.filter = nil, nil
	return a == b && (was == cur || reflect.DeepEqual(was.cfg.Tools, cur.cfg.Tools))
}

// buildPool assembles the pool from the servers (in any order) and the
// host's built-ins. Names are handed out by a namer, so collisions
// resolve the same way whatever order the servers became ready in: a
// built-in keeps its name, then the server first by name, then the tool
// first by its own name.
// prev, the pool this one replaces (nil for the first), supplies the names
// of the entries of servers not offering them, and the offers of views
// that did not change.
func buildPool(servers []poolServer, builtins []BuiltinTool, maxDescription int, prev *pool) *pool {
	if prev == nil {
		prev = emptyPool
	}
	slices.SortFunc(servers, func(a, b poolServer) int { return strings.Compare(a.name, b.name) })
	nTools, nPrompts := len(prev.tools), len(prev.prompts)
	p := &pool{
		builtinByName: map[string]*BuiltinTool{}, toolsByName: make(map[string]poolEntry, nTools), promptsByName: make(map[string]poolEntry, nPrompts),
		hiddenTools: map[string]poolEntry{}, off: map[string]bool{}, offRoutes: map[string]string{},
		views: make(map[*serverHandle]pooledView, len(servers)), offered: make(map[string]int, len(servers)), renamed: map[renameKey]string{},
		tools: make([]*Tool, 0, nTools), prompts: make([]Prompt, 0, nPrompts),
		parts: make(map[*serverHandle]poolServer, len(servers)), builtinsFrom: builtins, maxDescription: maxDescription,
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
	tools, prompts := newNamer("tool", nTools), newNamer("prompt", nPrompts)
	for i := range builtins {
		b := &builtins[i]
		p.builtinByName[b.Definition.Name] = b
		tools.holders[b.Definition.Name] = holder{}
		p.builtins = append(p.builtins, Tool{Name: b.Definition.Name, Builtin: true, Definition: b.Definition})
	}
	toolsSorted := true // p.tools is in name order so far
	for _, s := range servers {
		p.parts[s.h] = s
		v := s.h.view.Load()
		if v == nil {
			continue
		}
		p.views[s.h] = pooledView{view: v}
		if s.off {
			p.off[s.name] = true
			for _, t := range v.lists.tools {
				p.routeOff(known("tool", s.name, t.Name), s.name)
			}
			for _, pr := range v.lists.prompts {
				p.routeOff(known("prompt", s.name, pr.Name), s.name)
			}
			continue
		}
		if v.routesHiddenTools() {
			trusted := v.cfg.Trust == "trusted"
			for _, t := range v.lists.tools {
				if v.cfg.Tools.allowed(t.Name) && !v.withheld(t.Name) {
					q := known("tool", s.name, t.Name)
					if _, taken := p.hiddenTools[q]; taken {
						p.contested = true
					}
					p.hiddenTools[q] = poolEntry{h: s.h, name: t.Name, replayable: trusted && readOnlyAndIdempotent(t)}
				}
			}
		}
		if !v.offersTools() {
			continue
		}
		o := offerOf(s.name, v, prev.views[s.h], maxDescription)
		p.views[s.h] = pooledView{view: v, offer: o}
		for i := range o.tools {
			t := &o.tools[i]
			q := tools.claimPreferred(s.name, t.tool.Definition.Name, t.tool.Name)
			p.toolsByName[q] = poolEntry{h: s.h, name: t.tool.Definition.Name, replayable: t.replayable}
			if n := len(p.tools); toolsSorted && n > 0 && p.tools[n-1].Name > q {
				toolsSorted = false
			}
			tool := &t.tool
			if q != tool.Name { // renamed: a copy under its new name
				renamed := *tool
				renamed.Name = q
				tool = &renamed
			}
			p.tools = append(p.tools, tool)
		}
		p.offered[s.name] += len(o.tools)
		for _, pr := range o.prompts {
			q := prompts.claimPreferred(s.name, pr.Prompt.Name, pr.Name)
			p.promptsByName[q] = poolEntry{h: s.h, name: pr.Prompt.Name}
			pr.Name = q
			p.prompts = append(p.prompts, pr)
		}
		p.resources = append(p.resources, o.resources...)
		p.templates = append(p.templates, o.templates...)
	}
	slices.SortFunc(p.builtins, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	if !toolsSorted {
		slices.SortFunc(p.tools, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	}
	slices.SortFunc(p.prompts, func(a, b Prompt) int { return strings.Compare(a.Name, b.Name) })
	p.collisions = append(tools.collisions, prompts.collisions...)
	for _, c := range p.collisions {
		p.renamed[renameKey{c.Kind, c.Server, c.Original}] = c.Renamed
	}
	return p
}

// routeOff routes name to the toggled-off server.
func (p *pool) routeOff(name, server string) {
	if _, taken := p.offRoutes[name]; taken {
		p.contested = true
	}
	p.offRoutes[name] = server
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
			out[i] = poolItem{t.Server, t.Name, &t.Definition} // a pointer: boxing it allocates nothing
		}
		return out
	}
	promptItems := func(p *pool) []poolItem {
		out := make([]poolItem, len(p.prompts))
		for i := range p.prompts {
			pr := &p.prompts[i]
			out[i] = poolItem{pr.Server, pr.Name, &pr.Prompt}
		}
		return out
	}
	resourceItems := func(p *pool) []poolItem {
		out := make([]poolItem, 0, len(p.resources)+len(p.templates))
		for i := range p.resources {
			r := &p.resources[i]
			out = append(out, poolItem{r.Server, r.Resource.URI, &r.Resource})
		}
		for i := range p.templates {
			t := &p.templates[i]
			out = append(out, poolItem{t.Server, t.Template.URITemplate, &t.Template})
		}
		return out
	}
	// Servers whose view kept its offer list the same definitions: only
	// their names can differ (a collision), so their entries are compared
	// by name alone.
	sameOffer := map[string]bool{}
	for h, pv := range p.views {
		if pv.offer != nil && old.views[h].offer == pv.offer {
			sameOffer[pv.view.name] = true
		}
	}
	tools := diffItems(toolItems(old), toolItems(p), sameOffer)
	prompts := diffItems(promptItems(old), promptItems(p), sameOffer)
	resources := diffItems(resourceItems(old), resourceItems(p), sameOffer)
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
// diffs by server, each slice sorted. Definitions of the servers in
// sameDefs are known to be unchanged.
func diffItems(old, cur []poolItem, sameDefs map[string]bool) map[string]*ListDiff {
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
		case !sameDefs[it.server] && !reflect.DeepEqual(prev, it.def):
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

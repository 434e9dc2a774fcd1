package mcpvisor

import (
	"path"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mcpvisor/mcpvisor/protocol"
)

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
// shared by the views that follow; nextPool then only claims names and
// compares definitions only of servers whose offer changed.
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
	deferred       bool
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
		filter: &v.cfg.Tools, trust: v.cfg.Trust, deferred: v.cfg.Defer, maxDescription: maxDescription, pins: v.lists.pins,
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
			tool:       Tool{Name: QualifiedName(name, t.Name), Server: name, Trusted: trusted, Deferred: v.cfg.Defer, Definition: t},
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

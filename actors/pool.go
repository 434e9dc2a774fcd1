package actors

import (
	"path"
	"sort"
	"strings"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// pool is an immutable snapshot of everything the ready servers offer,
// built by the registry and read by callers without a mailbox hop.
type pool struct {
	tools         []Tool // sorted by qualified name
	toolsByName   map[string]poolEntry
	prompts       []Prompt // sorted by qualified name
	promptsByName map[string]poolEntry
	// hiddenTools routes the qualified names of the tools a server not
	// offering them (parked, or trying to connect again after it was
	// parked) listed when last connected: not in the pool, but a call by
	// name wakes the server or waits for it.
	hiddenTools map[string]poolEntry
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

var emptyPool = &pool{toolsByName: map[string]poolEntry{}, promptsByName: map[string]poolEntry{}, hiddenTools: map[string]poolEntry{}}

// QualifiedName returns the name under which a server's tool (or prompt)
// is offered: mcp__<server>__<name>, with every character outside
// [A-Za-z0-9_-] replaced by '_'.
func QualifiedName(server, name string) string {
	return "mcp__" + sanitize(server) + "__" + sanitize(name)
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

// buildPool assembles the pool from the ready servers, visited in name
// order so that a collision always resolves the same way: the first
// server (by name) keeps the name and the later one's entry is left out
// and logged.
func buildPool(servers map[string]*serverEntry, log zerolog.Logger) *pool {
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	sort.Strings(names)
	p := &pool{toolsByName: map[string]poolEntry{}, promptsByName: map[string]poolEntry{}, hiddenTools: map[string]poolEntry{}}
	for _, name := range names {
		e := servers[name]
		v := e.h.view.Load()
		if v == nil {
			continue
		}
		if v.routesHiddenTools() {
			for _, t := range v.lists.tools {
				if v.cfg.Tools.allowed(t.Name) {
					p.hiddenTools[QualifiedName(name, t.Name)] = poolEntry{h: e.h, name: t.Name, replayable: v.cfg.Trust == "trusted" && readOnlyAndIdempotent(t)}
				}
			}
		}
		if !v.offersTools() {
			continue
		}
		trusted := v.cfg.Trust == "trusted"
		for _, t := range v.lists.tools {
			if !v.cfg.Tools.allowed(t.Name) {
				continue
			}
			q := QualifiedName(name, t.Name)
			if prev, dup := p.toolsByName[q]; dup {
				log.Warn().Str("tool", q).Str("kept", prev.h.name+"/"+prev.name).Str("dropped", name+"/"+t.Name).Msg("tool name collision")
				continue
			}
			p.toolsByName[q] = poolEntry{h: e.h, name: t.Name, replayable: trusted && readOnlyAndIdempotent(t)}
			p.tools = append(p.tools, Tool{Name: q, Server: name, Trusted: trusted, Definition: t})
		}
		for _, pr := range v.lists.prompts {
			q := QualifiedName(name, pr.Name)
			if _, dup := p.promptsByName[q]; dup {
				continue
			}
			p.promptsByName[q] = poolEntry{h: e.h, name: pr.Name}
			p.prompts = append(p.prompts, Prompt{Name: q, Server: name, Prompt: pr})
		}
	}
	sort.Slice(p.tools, func(i, j int) bool { return p.tools[i].Name < p.tools[j].Name })
	sort.Slice(p.prompts, func(i, j int) bool { return p.prompts[i].Name < p.prompts[j].Name })
	return p
}

// readOnlyAndIdempotent reports whether a tool's annotations say both
// readOnlyHint and idempotentHint.
func readOnlyAndIdempotent(t protocol.Tool) bool {
	a := t.Annotations
	return a != nil && a.ReadOnlyHint != nil && *a.ReadOnlyHint && a.IdempotentHint != nil && *a.IdempotentHint
}

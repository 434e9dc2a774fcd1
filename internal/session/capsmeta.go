package session

import (
	"bytes"
	"encoding/json"
	"maps"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// capsMeta is the stateless-era _meta of the requests that declare
// capabilities of their own (RequestOptions.Capabilities), encoded. A
// gateway declares its client's capabilities on every call and they
// rarely change, so the session keeps the last encoding (eraMeta.caps)
// and makes a new one only when they differ.
//
// Concurrency: immutable once stored.
type capsMeta struct {
	caps protocol.ClientCapabilities // a deep copy of what was encoded
	json json.RawMessage             // eraMeta.options(caps), encoded
	// level is the session's leveled _meta when it was encoded (nil
	// before any SetLogLevel): a new log level makes it stale.
	level *leveledMeta
}

// withCaps returns the stateless-era _meta with the client capabilities
// replaced by caps, encoded: what options returns for a request with
// Capabilities and no Meta, encoded by encoding/json.
func (e *eraMeta) withCaps(caps *protocol.ClientCapabilities) (json.RawMessage, error) {
	level := e.leveled.Load()
	if c := e.caps.Load(); c != nil && c.level == level && sameCapabilities(&c.caps, caps) {
		return c.json, nil
	}
	raw, err := json.Marshal(e.options(RequestOptions{Capabilities: caps}))
	if err != nil {
		return nil, err
	}
	e.caps.Store(&capsMeta{caps: cloneCapabilities(caps), json: raw, level: level})
	return raw, nil
}

// sameCapabilities reports whether a and b encode alike: the same members
// set, with the same bytes.
func sameCapabilities(a, b *protocol.ClientCapabilities) bool {
	if (a.Roots == nil) != (b.Roots == nil) || a.Roots != nil && *a.Roots != *b.Roots {
		return false
	}
	return sameRawPtr(a.Sampling, b.Sampling) && sameRawPtr(a.Elicitation, b.Elicitation) && sameRawPtr(a.Tasks, b.Tasks) &&
		sameRawMap(a.Experimental, b.Experimental) && sameRawMap(a.Extensions, b.Extensions)
}

func sameRaw(a, b json.RawMessage) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func sameRawPtr(a, b *json.RawMessage) bool {
	if a == nil || b == nil {
		return a == b
	}
	return sameRaw(*a, *b)
}

func sameRawMap(a, b map[string]json.RawMessage) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !sameRaw(v, w) {
			return false
		}
	}
	return true
}

// cloneCapabilities copies c deeply: the session keeps it after the
// caller's request has ended.
func cloneCapabilities(c *protocol.ClientCapabilities) protocol.ClientCapabilities {
	out := *c
	if c.Roots != nil {
		r := *c.Roots
		out.Roots = &r
	}
	out.Sampling, out.Elicitation, out.Tasks = cloneRawPtr(c.Sampling), cloneRawPtr(c.Elicitation), cloneRawPtr(c.Tasks)
	out.Experimental, out.Extensions = cloneRawMap(c.Experimental), cloneRawMap(c.Extensions)
	return out
}

func cloneRawPtr(p *json.RawMessage) *json.RawMessage {
	if p == nil {
		return nil
	}
	r := json.RawMessage(bytes.Clone(*p))
	return &r
}

func cloneRawMap(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return nil
	}
	out := maps.Clone(m)
	for k, v := range out {
		out[k] = bytes.Clone(v)
	}
	return out
}

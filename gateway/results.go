package gateway

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The results of the stateless era (2026-07-28) carry members the
// handshake eras did not have: every result its resultType ("complete"
// unless it says otherwise: "input_required", or "task" for the tasks
// extension), and the cacheable ones (server/discover, the four lists,
// resources/read, and the skills extension's skills/list and skills/get)
// their caching hints, ttlMs and cacheScope (SEP-2549).
//
// The gateway's hints are never looser than what the servers behind it
// said: a list's ttlMs is the smallest of the ttlMs of that list of every
// ready server (a server that said nothing, as servers of the handshake
// eras do, counts as 0: immediately stale), and its cacheScope is
// "public" only when every one of them said "public". Options.MaxCacheTTL
// caps them all (a gateway with no server behind it answers with that
// cap, public). A resources/read result keeps the hints of the server
// that answered it, capped the same way.

// defaultMaxCacheTTL is Options.MaxCacheTTL's zero value.
const defaultMaxCacheTTL = 5 * time.Minute

// cacheableMethods are the methods whose complete results carry caching
// hints.
var cacheableMethods = []string{
	protocol.MethodDiscover, protocol.MethodToolsList, protocol.MethodPromptsList, protocol.MethodResourcesList,
	protocol.MethodResourcesTemplatesList, protocol.MethodResourcesRead, protocol.MethodSkillsList, protocol.MethodSkillsGet,
}

// ceiling is the loosest hint the gateway gives.
func (pl *pool) ceiling() protocol.CacheHint {
	return protocol.CacheHint{TTLMs: pl.opts.MaxCacheTTL.Milliseconds(), Public: true}
}

// listHint is the caching hint of the gateway's answer to method (a list,
// or server/discover): the strictest of the ready servers' (see above).
func (pl *pool) listHint(method string) protocol.CacheHint {
	h := pl.ceiling()
	for _, st := range pl.b.Status() {
		if st.State != mcpvisor.StateReady || st.ToggledOff {
			continue
		}
		var c protocol.CacheHints
		if st.Cache != nil {
			c = *st.Cache
		}
		switch method {
		case protocol.MethodDiscover:
			h = h.Stricter(c.Discover)
		case protocol.MethodToolsList:
			h = h.Stricter(c.Tools)
		case protocol.MethodPromptsList:
			h = h.Stricter(c.Prompts)
		case protocol.MethodResourcesList:
			h = h.Stricter(c.Resources)
		case protocol.MethodResourcesTemplatesList:
			h = h.Stricter(c.Templates)
		default:
			// skills/list and skills/get: what a server serves from its
			// resources, no fresher than its resource list.
			h = h.Stricter(c.Resources)
		}
	}
	return h
}

// modernResult returns result as the stateless era encodes it: with a
// resultType, and for a complete result of a cacheable method, with
// ttlMs and cacheScope (those result already has, from the server that
// answered, are kept when stricter).
func (pl *pool) modernResult(method string, result any) any {
	var raw []byte
	switch r := result.(type) {
	case protocol.ValidJSON:
		raw = r
	case json.RawMessage:
		raw = r
	default:
		var err error
		if raw, err = json.Marshal(result); err != nil {
			return result // reply reports the encoding error
		}
	}
	if len(raw) < 2 || raw[0] != '{' {
		return result
	}
	rt := protocol.ResultTypeOf(raw)
	if !slices.Contains(cacheableMethods, method) || (rt != "" && rt != protocol.ResultComplete) {
		if rt != "" {
			return protocol.ValidJSON(raw)
		}
		out := make([]byte, 0, len(raw)+26)
		out = append(out, `{"resultType":"complete"`...)
		if len(raw) > 2 {
			out = append(out, ',')
		}
		return protocol.ValidJSON(append(out, raw[1:]...))
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return result
	}
	var own struct {
		TTLMs      *int64 `json:"ttlMs"`
		CacheScope string `json:"cacheScope"`
	}
	_ = json.Unmarshal(raw, &own)
	var hint protocol.CacheHint
	if method == protocol.MethodResourcesRead {
		hint = protocol.HintOf(own.TTLMs, own.CacheScope).Stricter(pl.ceiling())
	} else {
		hint = pl.listHint(method)
	}
	obj["resultType"] = json.RawMessage(`"complete"`)
	obj["ttlMs"], _ = json.Marshal(hint.TTLMs)
	obj["cacheScope"], _ = json.Marshal(hint.Scope())
	out, err := json.Marshal(obj)
	if err != nil {
		return result
	}
	return protocol.ValidJSON(out)
}

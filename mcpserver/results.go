package mcpserver

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// The results of the stateless era (2026-07-28) carry members the
// handshake eras did not have: every result its resultType ("complete"
// unless it says otherwise: "input_required", or "task" for the tasks
// extension), and the cacheable ones (server/discover, the four lists,
// resources/read, and the skills extension's skills/list and skills/get)
// their caching hints, ttlMs and cacheScope (SEP-2549). Options.
// ModernResult is where a server adds them; these helpers do the
// encoding.

// cacheableMethods are the methods whose complete results carry caching
// hints.
var cacheableMethods = []string{
	protocol.MethodDiscover, protocol.MethodToolsList, protocol.MethodPromptsList, protocol.MethodResourcesList,
	protocol.MethodResourcesTemplatesList, protocol.MethodResourcesRead, protocol.MethodSkillsList, protocol.MethodSkillsGet,
}

// Cacheable reports whether the complete results of method carry caching
// hints in the stateless era.
func Cacheable(method string) bool { return slices.Contains(cacheableMethods, method) }

// CompleteResult returns result (which must encode to a JSON object) as
// the stateless era encodes it: with resultType "complete" unless it
// names a resultType of its own, and, when hint is not nil, with ttlMs and
// cacheScope from hint (replacing any it had). What does not encode to an
// object is returned unchanged.
func CompleteResult(result any, hint *protocol.CacheHint) any {
	raw, ok := encodeObject(result)
	if !ok {
		return result
	}
	rt, hasRT, ok1 := protocol.RawMember(raw, "resultType")
	_, hasTTL, ok2 := protocol.RawMember(raw, "ttlMs")
	_, hasScope, ok3 := protocol.RawMember(raw, "cacheScope")
	scanned := ok1 && ok2 && ok3
	if hint == nil && scanned && hasRT && len(rt) > 0 {
		return protocol.ValidJSON(raw)
	}
	if scanned && !hasRT && !hasTTL && !hasScope {
		out := make([]byte, 0, len(raw)+80)
		out = append(out, `{"resultType":"complete"`...)
		if hint != nil {
			out = appendHint(append(out, ','), *hint)
		}
		if !isEmptyObject(raw) {
			out = append(out, ',')
			out = append(out, trimObjectStart(raw)...)
		} else {
			out = append(out, '}')
		}
		return protocol.ValidJSON(out)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return result
	}
	if _, ok := obj["resultType"]; !ok {
		obj["resultType"] = json.RawMessage(`"complete"`)
	}
	if hint != nil {
		obj["ttlMs"], _ = json.Marshal(hint.TTLMs)
		obj["cacheScope"], _ = json.Marshal(hint.Scope())
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return result
	}
	return protocol.ValidJSON(out)
}

// appendHint appends the ttlMs and cacheScope members of hint.
func appendHint(b []byte, hint protocol.CacheHint) []byte {
	b = append(b, `"ttlMs":`...)
	b = strconv.AppendInt(b, max(hint.TTLMs, 0), 10)
	b = append(b, `,"cacheScope":`...)
	return protocol.AppendString(b, hint.Scope())
}

// encodeObject encodes result and reports whether it is a JSON object.
func encodeObject(result any) ([]byte, bool) {
	var raw []byte
	switch r := result.(type) {
	case protocol.ValidJSON:
		raw = r
	case json.RawMessage:
		raw = r
	default:
		var err error
		if raw, err = json.Marshal(result); err != nil {
			return nil, false
		}
	}
	return raw, isObject(raw)
}

// trimObjectStart returns an object's encoding without its opening brace
// (and the space after it).
func trimObjectStart(raw []byte) []byte {
	for i, c := range raw {
		if c == '{' {
			raw = raw[i+1:]
			break
		}
	}
	for len(raw) > 0 && (raw[0] == ' ' || raw[0] == '\t' || raw[0] == '\r' || raw[0] == '\n') {
		raw = raw[1:]
	}
	return raw
}

package protocol

import (
	"encoding/json"
	"reflect"
)

// listToolsPage is ListToolsResult with the tools as toolAlias, which has
// no UnmarshalJSON: encoding/json decodes the whole page in one pass,
// where each Tool's UnmarshalJSON would scan and decode its tool again
// (a tools/list page was decoded about three times over, the largest
// share of a connect's JSON work).
type listToolsPage struct {
	Meta       Meta        `json:"_meta,omitempty"`
	Tools      []toolAlias `json:"tools"`
	NextCursor string      `json:"nextCursor,omitempty"`
	ResultType string      `json:"resultType,omitempty"`
	TTLMs      *int64      `json:"ttlMs,omitempty"`
	CacheScope string      `json:"cacheScope,omitempty"`
}

// toolKeys are the members a Tool names.
var toolKeys = jsonKeysOf(reflect.TypeFor[toolAlias]())

// decodeJSON decodes a page validated by Decode. A page whose tools all
// stick to the members Tool names is decoded in one pass; one with other
// members takes the per-tool path that keeps them in Extra.
func (r *ListToolsResult) decodeJSON(data []byte) error {
	if elementsHaveUnknownKey(data, "tools", toolKeys) {
		type plain ListToolsResult // without decodeJSON: the per-tool path
		return json.Unmarshal(data, (*plain)(r))
	}
	var page listToolsPage
	if err := json.Unmarshal(data, &page); err != nil {
		return err
	}
	*r = ListToolsResult{Meta: page.Meta, NextCursor: page.NextCursor, ResultType: page.ResultType, TTLMs: page.TTLMs, CacheScope: page.CacheScope}
	if page.Tools != nil {
		r.Tools = make([]Tool, len(page.Tools))
		for i := range page.Tools {
			r.Tools[i] = Tool(page.Tools[i])
		}
	}
	return nil
}

// elementsHaveUnknownKey reports whether an element of the array that is
// the top-level member named member of the JSON object data (already
// known to be valid) has a member not in known. Keys with escapes count
// as unknown, which only costs the slow path.
func elementsHaveUnknownKey(data []byte, member string, known map[string]bool) bool {
	depth := 0
	expectKey := false // the next string is a key the scan checks
	isMember := false  // the last top-level key was member
	inMember := false  // inside member's value
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '{', '[':
			depth++
			switch depth {
			case 1:
				expectKey = c == '{'
			case 2:
				inMember = isMember
				expectKey = false
			default:
				expectKey = inMember && depth == 3 && c == '{'
			}
		case '}', ']':
			depth--
			if depth <= 1 {
				inMember = false
			}
			expectKey = false
		case ',':
			expectKey = depth == 1 || (inMember && depth == 3)
		case '"':
			j, escaped := skipString(data, i)
			if expectKey {
				key := data[i+1 : j]
				if depth == 1 {
					isMember = !escaped && string(key) == member
				} else if escaped || !known[string(key)] {
					return true
				}
				expectKey = false
			}
			i = j
		}
	}
	return false
}

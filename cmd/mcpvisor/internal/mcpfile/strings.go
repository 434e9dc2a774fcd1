package mcpfile

import (
	"encoding/json"
	"slices"
)

// ReplaceStrings returns raw, a JSON value, with the string members of
// its objects (at any depth, not inside arrays) that replace chooses
// replaced: replace gets the member's path (the keys from raw down to it)
// and its value, and returns the new value and true to replace it. The
// rest of raw is kept as written. Raw that is not valid JSON is returned
// unchanged.
func ReplaceStrings(raw []byte, replace func(path []string, value string) (string, bool)) []byte {
	if checkSyntax(raw) != nil {
		return raw
	}
	type edit struct {
		at   span
		with []byte
	}
	var edits []edit
	var walk func(at int, path []string)
	walk = func(at int, path []string) {
		o := parseObject(raw, at)
		for _, m := range o.members {
			p := append(slices.Clip(path), m.name)
			switch raw[m.value.start] {
			case '{':
				walk(m.value.start, p)
			case '"':
				var s string
				_ = json.Unmarshal(raw[m.value.start:m.value.end], &s) // a valid JSON string
				if with, ok := replace(p, s); ok {
					edits = append(edits, edit{m.value, quote(with)})
				}
			}
		}
	}
	start := skipSpace(raw, 0)
	if raw[start] != '{' {
		return raw
	}
	walk(start, nil)
	out := raw
	for _, e := range slices.Backward(edits) {
		out = splice(out, e.at, e.with)
	}
	return out
}

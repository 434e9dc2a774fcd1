package protocol

import (
	"encoding/json"
	"strings"
)

// RawMember returns the raw value of the member key of the JSON object obj
// (valid JSON, e.g. the params of a decoded message), without reflection:
// found says whether the object has the member. ok is false when the scan
// cannot answer as encoding/json would (obj is not an object, a key is
// spelled with escapes, or key appears more than once or in another case:
// encoding/json matches keys case-insensitively); the caller then asks
// encoding/json.
func RawMember(obj []byte, key string) (v json.RawMessage, found, ok bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, false, false
	}
	i = skipSpace(obj, i+1)
	for i < len(obj) && obj[i] != '}' {
		if obj[i] == ',' {
			i = skipSpace(obj, i+1)
			continue
		}
		k, val, end, good := member(obj, i)
		if !good {
			return nil, false, false
		}
		if len(k) == len(key) && strings.EqualFold(string(k), key) {
			if found || string(k) != key {
				return nil, false, false
			}
			v, found = val, true
		}
		i = end
	}
	return v, found, true
}

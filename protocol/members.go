package protocol

import (
	"encoding/json"
	"strings"
)

// EachMember calls f with the key (without its quotes) and the raw value
// of each member of the JSON object obj (valid JSON, e.g. the params of a
// decoded message), in order, until f returns false. It reports false
// when obj is not an object, a key has escapes or bytes outside ASCII, or
// f returned false.
func EachMember(obj []byte, f func(key, val []byte) bool) bool {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	i = skipSpace(obj, i+1)
	for i < len(obj) && obj[i] != '}' {
		if obj[i] == ',' {
			i = skipSpace(obj, i+1)
			continue
		}
		k, v, end, ok := member(obj, i)
		if !ok || !f(k, v) {
			return false
		}
		i = end
	}
	return i < len(obj)
}

// PlainString returns the text of the JSON string v when it needs no
// decoding: no escapes and no bytes outside ASCII.
func PlainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if end, special := stringEnd(v, 0); special || end != len(v) {
		return "", false
	}
	return string(v[1 : len(v)-1]), true
}

// RawMember returns the raw value of the member key of the JSON object obj
// (valid JSON, e.g. the params of a decoded message), without reflection:
// found says whether the object has the member. ok is false when the scan
// cannot answer as encoding/json would (obj is not an object, a key is
// spelled with escapes, or key appears more than once or in another case:
// encoding/json matches keys case-insensitively); the caller then asks
// encoding/json.
func RawMember(obj []byte, key string) (v json.RawMessage, found, ok bool) {
	ok = EachMember(obj, func(k, val []byte) bool {
		if len(k) != len(key) || !strings.EqualFold(string(k), key) {
			return true
		}
		if found || string(k) != key {
			return false
		}
		v, found = val, true
		return true
	})
	if !ok {
		return nil, false, false
	}
	return v, found, true
}

// PlainStringMember returns the value of the member key of the JSON object
// obj (valid JSON), when the object names key exactly once, spelled
// exactly so, and its value is a string without escapes or non-ASCII
// bytes. Otherwise it reports false, and the caller should ask
// encoding/json (which matches keys case-insensitively and decodes
// escapes).
func PlainStringMember(obj []byte, key string) (string, bool) {
	v, found, ok := RawMember(obj, key)
	if !ok || !found {
		return "", false
	}
	return PlainString(v)
}

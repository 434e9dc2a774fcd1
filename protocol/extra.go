package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"sync"
)

// Meta is the _meta member that requests, results, notifications and most
// MCP objects may carry. Values are kept as raw JSON so that a host can
// forward them unchanged, whatever extension put them there.
type Meta map[string]json.RawMessage

// Get decodes the value stored under key into v and reports whether the key
// was present and decodable.
func (m Meta) Get(key string, v any) bool {
	raw, ok := m[key]
	if !ok {
		return false
	}
	return json.Unmarshal(raw, v) == nil
}

// Set stores the JSON encoding of v under key.
func (m Meta) Set(key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	m[key] = raw
	return nil
}

// Extra holds the members of a JSON object that its Go type does not name:
// fields from a newer spec revision or a vendor extension. Types that embed
// it in their encoding (Tool, CallToolResult, Content) write them back out,
// so a host or gateway that forwards the object loses nothing.
type Extra map[string]json.RawMessage

// Unmarshal decodes JSON that Decode has already validated (a result or
// params member) into v. For the MCP types with their own decoders it
// skips the validation pass encoding/json would repeat; for anything else
// it is json.Unmarshal.
func Unmarshal(data []byte, v any) error {
	if d, ok := v.(interface{ decodeJSON([]byte) error }); ok {
		return d.decodeJSON(data)
	}
	return json.Unmarshal(data, v)
}

// knownKeys caches, per struct type, the JSON member names its fields use.
var knownKeys sync.Map // reflect.Type -> map[string]bool

func jsonKeysOf(t reflect.Type) map[string]bool {
	if k, ok := knownKeys.Load(t); ok {
		return k.(map[string]bool)
	}
	keys := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			if f.Anonymous {
				continue
			}
			name = f.Name
		}
		keys[name] = true
	}
	knownKeys.Store(t, keys)
	return keys
}

// decodeWithExtra decodes data into the struct pointed to by alias (a
// method-free alias of the real type) and returns the members the struct
// does not name. The common case, an object with only known members, costs
// one decode and an allocation-free scan of the top-level keys.
func decodeWithExtra(data []byte, alias any) (Extra, error) {
	if err := json.Unmarshal(data, alias); err != nil {
		return nil, err
	}
	known := jsonKeysOf(reflect.TypeOf(alias).Elem())
	if !hasUnknownKey(data, known) {
		return nil, nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, err
	}
	var extra Extra
	for k, v := range all {
		if known[k] {
			continue
		}
		if extra == nil {
			extra = Extra{}
		}
		extra[k] = v
	}
	return extra, nil
}

// hasUnknownKey reports whether the JSON object data (already known to be
// valid) has a top-level member not in known. Keys with escapes are
// reported as unknown, which only costs the slow path.
func hasUnknownKey(data []byte, known map[string]bool) bool {
	depth := 0
	expectKey := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '{', '[':
			depth++
			expectKey = depth == 1 && c == '{'
		case '}', ']':
			depth--
		case ',':
			expectKey = depth == 1
		case '"':
			j, escaped := skipString(data, i)
			if expectKey {
				if escaped || !known[string(data[i+1:j])] {
					return true
				}
				expectKey = false
			}
			i = j
		}
	}
	return false
}

// skipString returns the index of the quote that closes the string
// opening at data[i] in valid JSON, and whether the string has escapes.
func skipString(data []byte, i int) (end int, escaped bool) {
	j := i + 1
	for ; j < len(data) && data[j] != '"'; j++ {
		if data[j] == '\\' {
			escaped = true
			j++
		}
	}
	return j, escaped
}

// encodeWithExtra encodes alias (a method-free alias of the real type) and
// appends the extra members that the struct does not name, in key order.
func encodeWithExtra(alias any, extra Extra) ([]byte, error) {
	b, err := json.Marshal(alias)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	known := jsonKeysOf(reflect.TypeOf(alias).Elem())
	keys := make([]string, 0, len(extra))
	for k := range extra {
		if !known[k] {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return b, nil
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	buf.Grow(len(b) + 64*len(keys))
	buf.Write(b[:len(b)-1]) // drop the closing brace
	first := len(b) == 2    // "{}"
	for _, k := range keys {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		buf.Write(appendJSONString(nil, k))
		buf.WriteByte(':')
		if v := extra[k]; json.Valid(v) {
			buf.Write(v)
		} else {
			buf.WriteString("null")
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

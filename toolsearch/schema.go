package toolsearch

import "encoding/json"

// Bounds on what is read from one inputSchema.
const (
	maxSchemaDepth  = 6
	maxSchemaParams = 256
)

// schemaText is what an inputSchema says in words: its property names
// (nested ones too) and their descriptions, titles and string enum values.
type schemaText struct {
	names []string
	descs []string
}

// readSchema walks a JSON Schema for parameter names and descriptions.
// An invalid or empty schema yields nothing.
func readSchema(raw json.RawMessage) schemaText {
	var st schemaText
	if len(raw) == 0 {
		return st
	}
	var root any
	if json.Unmarshal(raw, &root) != nil {
		return st
	}
	st.walk(root, 0)
	return st
}

func (st *schemaText) walk(node any, depth int) {
	if depth > maxSchemaDepth || len(st.names) >= maxSchemaParams {
		return
	}
	m, ok := node.(map[string]any)
	if !ok {
		return
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for name, sub := range props {
			if len(st.names) >= maxSchemaParams {
				return
			}
			st.names = append(st.names, name)
			if sm, ok := sub.(map[string]any); ok {
				st.describe(sm)
			}
			st.walk(sub, depth+1)
		}
	}
	for _, key := range []string{"items", "additionalProperties", "not"} {
		st.walk(m[key], depth+1)
	}
	for _, key := range []string{"anyOf", "oneOf", "allOf", "prefixItems"} {
		if arr, ok := m[key].([]any); ok {
			for _, sub := range arr {
				if sm, ok := sub.(map[string]any); ok {
					st.describe(sm)
				}
				st.walk(sub, depth+1)
			}
		}
	}
	for _, key := range []string{"$defs", "definitions"} {
		if defs, ok := m[key].(map[string]any); ok {
			for _, sub := range defs {
				st.walk(sub, depth+1)
			}
		}
	}
}

// describe collects a property schema's description, title and string
// enum values.
func (st *schemaText) describe(m map[string]any) {
	for _, key := range []string{"description", "title"} {
		if s, ok := m[key].(string); ok && s != "" {
			st.descs = append(st.descs, s)
		}
	}
	if enum, ok := m["enum"].([]any); ok {
		for i, v := range enum {
			if i >= 32 {
				break
			}
			if s, ok := v.(string); ok {
				st.descs = append(st.descs, s)
			}
		}
	}
}

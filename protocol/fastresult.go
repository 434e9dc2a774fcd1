package protocol

import (
	"encoding/json"
	"strings"
)

// scanCallToolResult decodes the common shape of a tools/call result,
//
//	{"content":[{"type":"text","text":"…"}, …], "isError":false,
//	 "structuredContent":…, "resultType":"…"}
//
// without reflection, into r (which must be zero). It reports false,
// having left r unusable, for anything else: members it does not handle
// (_meta, annotations, resources, unknown members that belong in Extra),
// duplicate top-level members, values of an unexpected type. The caller
// then decodes with encoding/json, which is the reference this must agree
// with (FuzzCallToolResult).
//
// data must be valid JSON (Decode validated the frame it came from, or
// encoding/json validated it before calling UnmarshalJSON).
//
// Why: encoding/json's reflection was 8–15 % of the client's CPU per call
// in the peer benchmarks (bench/peers, CallSequential and
// HTTPCallSequential); this scan costs about a tenth of that.
func scanCallToolResult(data []byte, r *CallToolResult) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	var seenContent, seenIsError, seenStructured, seenResultType bool
	i = skipSpace(data, i+1)
	for i < len(data) && data[i] != '}' {
		if data[i] == ',' {
			i = skipSpace(data, i+1)
			continue
		}
		key, v, end, ok := member(data, i)
		if !ok {
			return false
		}
		i = end
		switch string(key) {
		case "content":
			if seenContent {
				return false
			}
			seenContent = true
			if string(v) == "null" {
				continue
			}
			if !scanContents(v, r) {
				return false
			}
		case "isError":
			if seenIsError {
				return false
			}
			seenIsError = true
			switch string(v) {
			case "true":
				r.IsError = true
			case "false", "null":
			default:
				return false
			}
		case "structuredContent":
			if seenStructured {
				return false
			}
			seenStructured = true
			r.StructuredContent = append(json.RawMessage(nil), v...)
		case "resultType":
			if seenResultType {
				return false
			}
			seenResultType = true
			if !scanString(v, &r.ResultType) {
				return false
			}
		default:
			return false // _meta, or a member for Extra: the general path
		}
	}
	return true
}

// scanContents decodes a content array whose blocks have only plain
// string members this scan knows.
func scanContents(v []byte, r *CallToolResult) bool {
	if v[0] != '[' {
		return false
	}
	r.Content = []Content{}
	i := skipSpace(v, 1)
	for i < len(v) && v[i] != ']' {
		if v[i] == ',' {
			i = skipSpace(v, i+1)
			continue
		}
		end := valueEnd(v, i)
		if end < 0 || v[i] != '{' {
			return false
		}
		r.Content = append(r.Content, Content{})
		if !scanContent(v[i:end], &r.Content[len(r.Content)-1]) {
			return false
		}
		i = skipSpace(v, end)
	}
	return true
}

// scanContent decodes one content block object.
func scanContent(obj []byte, c *Content) bool {
	i := skipSpace(obj, 1)
	for i < len(obj) && obj[i] != '}' {
		if obj[i] == ',' {
			i = skipSpace(obj, i+1)
			continue
		}
		key, v, end, ok := member(obj, i)
		if !ok {
			return false
		}
		i = end
		var dst *string
		switch string(key) {
		case "type":
			if t, ok := contentTypes[string(v)]; ok {
				c.Type = t // the usual types, without allocating
				continue
			}
			dst = &c.Type
		case "text":
			dst = &c.Text
		case "data":
			dst = &c.Data
		case "mimeType":
			dst = &c.MimeType
		case "uri":
			dst = &c.URI
		case "name":
			dst = &c.Name
		case "title":
			dst = &c.Title
		case "description":
			dst = &c.Description
		default:
			// Other members (annotations, _meta, resource, …), and
			// near-misses that encoding/json would match case-insensitively.
			return false
		}
		if !scanString(v, dst) {
			return false
		}
	}
	return true
}

// contentTypes are the content types by their JSON encoding.
var contentTypes = map[string]string{
	`"text"`:          ContentText,
	`"image"`:         ContentImage,
	`"audio"`:         ContentAudio,
	`"resource_link"`: ContentResourceLink,
	`"resource"`:      ContentResource,
}

// member reads the object member starting at data[i] (a key's quote): its
// unescaped key, its value, and the index after the value and any space.
func member(data []byte, i int) (key, v []byte, next int, ok bool) {
	if data[i] != '"' {
		return nil, nil, 0, false
	}
	keyEnd, special := stringEnd(data, i)
	if special || keyEnd < 0 {
		return nil, nil, 0, false
	}
	key = data[i+1 : keyEnd-1]
	i = skipSpace(data, keyEnd)
	i = skipSpace(data, i+1) // the colon
	end := valueEnd(data, i)
	if end < 0 {
		return nil, nil, 0, false
	}
	return key, data[i:end], skipSpace(data, end), true
}

// scanString stores the JSON string v in dst; null leaves dst alone, as
// encoding/json does. Strings with escapes or non-ASCII bytes are decoded
// by encoding/json (which replaces invalid UTF-8).
func scanString(v []byte, dst *string) bool {
	switch {
	case string(v) == "null":
		return true
	case v[0] != '"':
		return false
	}
	if _, special := stringEnd(v, 0); !special {
		*dst = string(v[1 : len(v)-1])
		return true
	}
	return json.Unmarshal(v, dst) == nil
}

// PlainStringMember returns the value of the member key of the JSON object
// obj (valid JSON), when the object names key exactly once, spelled
// exactly so, and its value is a string without escapes or non-ASCII
// bytes. Otherwise it reports false, and the caller should ask
// encoding/json (which matches keys case-insensitively and decodes
// escapes).
func PlainStringMember(obj []byte, key string) (string, bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return "", false
	}
	var found []byte
	i = skipSpace(obj, i+1)
	for i < len(obj) && obj[i] != '}' {
		if obj[i] == ',' {
			i = skipSpace(obj, i+1)
			continue
		}
		k, v, end, ok := member(obj, i)
		if !ok || (found != nil && len(k) == len(key) && strings.EqualFold(string(k), key)) {
			return "", false
		}
		if string(k) == key {
			found = v
		} else if strings.EqualFold(string(k), key) {
			return "", false
		}
		i = end
	}
	if found == nil || found[0] != '"' {
		return "", false
	}
	if _, special := stringEnd(found, 0); special {
		return "", false
	}
	return string(found[1 : len(found)-1]), true
}

package protocol

import (
	"encoding/json"
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
		key, vi, ok := memberKey(data, i)
		if !ok {
			return false
		}
		if string(key) == "content" {
			// The content, usually nearly all of the result, is decoded
			// as it is scanned: one pass over each text.
			if seenContent {
				return false
			}
			seenContent = true
			end := vi + len("null")
			if !hasLiteral(data, vi, "null") {
				if end, ok = scanContents(data, vi, r); !ok {
					return false
				}
			}
			i = skipSpace(data, end)
			continue
		}
		end := valueEnd(data, vi)
		if end < 0 {
			return false
		}
		v := data[vi:end]
		i = skipSpace(data, end)
		switch string(key) {
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

// scanContents decodes the content array starting at data[i], whose
// blocks have only string members this scan knows, and returns the index
// just past the array.
func scanContents(data []byte, i int, r *CallToolResult) (int, bool) {
	if i >= len(data) || data[i] != '[' {
		return 0, false
	}
	r.Content = []Content{}
	i = skipSpace(data, i+1)
	for i < len(data) && data[i] != ']' {
		if data[i] == ',' {
			i = skipSpace(data, i+1)
			continue
		}
		if data[i] != '{' {
			return 0, false
		}
		r.Content = append(r.Content, Content{})
		end, ok := scanContent(data, i, &r.Content[len(r.Content)-1])
		if !ok {
			return 0, false
		}
		i = skipSpace(data, end)
	}
	if i >= len(data) {
		return 0, false
	}
	return i + 1, true
}

// scanContent decodes the content block object starting at data[i] and
// returns the index just past it.
func scanContent(data []byte, i int, c *Content) (int, bool) {
	i = skipSpace(data, i+1)
	for i < len(data) && data[i] != '}' {
		if data[i] == ',' {
			i = skipSpace(data, i+1)
			continue
		}
		key, vi, ok := memberKey(data, i)
		if !ok {
			return 0, false
		}
		var dst *string
		switch string(key) {
		case "type":
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
			return 0, false
		}
		// Every member this scan knows is a string, or null, which leaves
		// the field alone, as encoding/json does.
		if hasLiteral(data, vi, "null") {
			i = skipSpace(data, vi+len("null"))
			continue
		}
		if vi >= len(data) || data[vi] != '"' {
			return 0, false
		}
		if dst == &c.Type {
			if end, _ := stringEnd(data, vi); end > 0 {
				if t, ok := contentTypes[string(data[vi:end])]; ok {
					c.Type = t // the usual types, without allocating
					i = skipSpace(data, end)
					continue
				}
			}
		}
		var end int
		if *dst, end, ok = stringAt(data, vi); !ok {
			return 0, false
		}
		i = skipSpace(data, end)
	}
	if i >= len(data) {
		return 0, false
	}
	return i + 1, true
}

// contentTypes are the content types by their JSON encoding.
var contentTypes = map[string]string{
	`"text"`:          ContentText,
	`"image"`:         ContentImage,
	`"audio"`:         ContentAudio,
	`"resource_link"`: contentResourceLink,
	`"resource"`:      ContentResource,
}

// member reads the object member starting at data[i] (a key's quote): its
// unescaped key, its value, and the index after the value and any space.
func member(data []byte, i int) (key, v []byte, next int, ok bool) {
	key, i, ok = memberKey(data, i)
	if !ok {
		return nil, nil, 0, false
	}
	end := valueEnd(data, i)
	if end < 0 {
		return nil, nil, 0, false
	}
	return key, data[i:end], skipSpace(data, end), true
}

// memberKey reads the key of the object member starting at data[i] (a
// key's quote), which must have no escapes, and returns the index of its
// value.
func memberKey(data []byte, i int) (key []byte, value int, ok bool) {
	if data[i] != '"' {
		return nil, 0, false
	}
	keyEnd, special := stringEnd(data, i)
	if special || keyEnd < 0 {
		return nil, 0, false
	}
	key = data[i+1 : keyEnd-1]
	i = skipSpace(data, keyEnd)
	return key, skipSpace(data, i+1), true // after the colon
}

// scanString stores the JSON string v in dst; null leaves dst alone, as
// encoding/json does.
func scanString(v []byte, dst *string) bool {
	switch {
	case string(v) == "null":
		return true
	case len(v) == 0 || v[0] != '"':
		return false
	}
	s, _, ok := stringAt(v, 0)
	if ok {
		*dst = s
	}
	return ok
}

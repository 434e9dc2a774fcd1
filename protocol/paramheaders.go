package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
)

// Tool parameters mirrored into HTTP headers (2026-07-28, SEP-2243): a
// property of a tool's inputSchema that carries "x-mcp-header": "Name" is
// sent, besides in the body, as the header Mcp-Param-Name of every
// tools/call POST, so that intermediaries can route on it without reading
// the body.

// xmcpHeader is the schema member that designates a mirrored parameter.
const xmcpHeader = "x-mcp-header"

// ParamHeaderPrefix starts the name of a mirrored parameter's header.
const ParamHeaderPrefix = "Mcp-Param-"

// ErrInvalidParamHeader matches a *ParamHeaderError: a tool whose
// x-mcp-header annotations break the revision's constraints. Clients of
// the Streamable HTTP transport leave such a tool out of their list.
var ErrInvalidParamHeader = errors.New("protocol: invalid x-mcp-header annotation")

// ErrParamHeaderValue: an argument designated by x-mcp-header holds a
// value that cannot be mirrored (an object or an array, a fraction, or an
// integer outside JavaScript's safe range).
var ErrParamHeaderValue = errors.New("protocol: argument cannot be mirrored into its Mcp-Param header")

// ParamHeaderError says which annotation of a schema is invalid and why.
type ParamHeaderError struct {
	Property string // the property's path in the schema, dot-separated
	Header   string // the annotation's value (as JSON when it is not a string)
	Reason   string
}

func (e *ParamHeaderError) Error() string {
	return fmt.Sprintf("%s: property %q, %s %q: %s", ErrInvalidParamHeader, e.Property, xmcpHeader, e.Header, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidParamHeader) true.
func (e *ParamHeaderError) Is(target error) bool { return target == ErrInvalidParamHeader }

// ParamHeader is one mirrored parameter of a tool.
type ParamHeader struct {
	// Name is the annotation's value: the header is ParamHeaderPrefix+Name.
	Name string
	// Header is ParamHeaderPrefix+Name in canonical form (net/textproto).
	Header string
	// Path leads from the arguments object to the value: the property
	// names, outermost first (one for a top-level parameter).
	Path []string
}

// safeInteger is the largest integer magnitude a mirrored value may have
// (2^53-1, JavaScript's Number.MAX_SAFE_INTEGER).
const safeInteger = 1<<53 - 1

// ParamHeaders returns the mirrored parameters of a tool's inputSchema
// (none: nil), or a *ParamHeaderError when an annotation is invalid: not
// a non-empty HTTP token (RFC 9110 tchar: no space, colon, control or
// non-ASCII character), not unique among the schema's annotations
// (case-insensitively), or on a property whose type is not string,
// integer or boolean. Annotations are found on properties at any depth of
// nested object properties. A schema that is not a JSON object has none.
func ParamHeaders(inputSchema json.RawMessage) ([]ParamHeader, error) {
	if !bytes.Contains(inputSchema, []byte(xmcpHeader)) {
		return nil, nil // the usual case: no annotation anywhere
	}
	var out []ParamHeader
	seen := map[string]string{} // lower-cased name → property
	if err := collectParamHeaders(inputSchema, nil, seen, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// schemaNode is what the walk reads of one (sub)schema.
type schemaNode struct {
	Type       json.RawMessage            `json:"type"`
	Properties map[string]json.RawMessage `json:"properties"`
	Header     json.RawMessage            `json:"x-mcp-header"`
}

func collectParamHeaders(schema json.RawMessage, path []string, seen map[string]string, out *[]ParamHeader) error {
	var node schemaNode
	if json.Unmarshal(schema, &node) != nil {
		return nil
	}
	names := make([]string, 0, len(node.Properties))
	for name := range node.Properties {
		names = append(names, name)
	}
	slices.Sort(names) // deterministic order of headers and errors
	for _, name := range names {
		propPath := append(slices.Clip(path), name)
		var prop schemaNode
		if json.Unmarshal(node.Properties[name], &prop) != nil {
			continue
		}
		if prop.Header != nil {
			h, err := checkParamHeader(prop, propPath, seen)
			if err != nil {
				return err
			}
			*out = append(*out, h)
			continue
		}
		if len(prop.Properties) > 0 {
			if err := collectParamHeaders(node.Properties[name], propPath, seen, out); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkParamHeader(prop schemaNode, path []string, seen map[string]string) (ParamHeader, error) {
	property := strings.Join(path, ".")
	fail := func(header, reason string) (ParamHeader, error) {
		return ParamHeader{}, &ParamHeaderError{Property: property, Header: header, Reason: reason}
	}
	var name string
	if json.Unmarshal(prop.Header, &name) != nil {
		return fail(string(prop.Header), "not a string")
	}
	if name == "" {
		return fail(name, "empty")
	}
	for i := 0; i < len(name); i++ {
		if !isTChar(name[i]) {
			return fail(name, fmt.Sprintf("character %q is not allowed in an HTTP field name", name[i]))
		}
	}
	if !primitiveType(prop.Type) {
		return fail(name, fmt.Sprintf("type %s is not string, integer or boolean", typeText(prop.Type)))
	}
	key := strings.ToLower(name)
	if other, dup := seen[key]; dup {
		return fail(name, fmt.Sprintf("also used by property %q (names are case-insensitive)", other))
	}
	seen[key] = property
	return ParamHeader{Name: name, Header: textproto.CanonicalMIMEHeaderKey(ParamHeaderPrefix + name), Path: path}, nil
}

// isTChar reports whether b may appear in an HTTP token (RFC 9110 §5.6.2).
func isTChar(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
}

// primitiveType accepts "string", "integer" and "boolean", alone or with
// "null" in a type list.
func primitiveType(raw json.RawMessage) bool {
	ok := func(t string) bool { return t == "string" || t == "integer" || t == "boolean" }
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return ok(one)
	}
	var many []string
	if json.Unmarshal(raw, &many) != nil {
		return false
	}
	n := 0
	for _, t := range many {
		switch {
		case ok(t):
			n++
		case t != "null":
			return false
		}
	}
	return n == 1
}

func typeText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "(none)"
	}
	return string(raw)
}

// ParamHeaderValue is one header of a tools/call request.
type ParamHeaderValue struct {
	Header string // ParamHeaderPrefix + the annotation's name
	Value  string // encoded with EncodeHeaderValue
}

// ParamHeaderValues returns the headers of a call whose arguments are
// args (a JSON object, or nil), in the order of hs. A parameter that is
// absent or null has no header. Strings are sent as they are, integers in
// decimal, booleans as true or false, each encoded with
// EncodeHeaderValue. Errors match ErrParamHeaderValue.
func ParamHeaderValues(hs []ParamHeader, args json.RawMessage) ([]ParamHeaderValue, error) {
	if len(hs) == 0 || len(args) == 0 {
		return nil, nil
	}
	out := make([]ParamHeaderValue, 0, len(hs))
	for _, h := range hs {
		raw, ok := lookup(args, h.Path)
		if !ok {
			continue // absent, null, or args is not an object (the server will say what is wrong)
		}
		v, err := headerText(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: argument %q (%s%s): %v", ErrParamHeaderValue, strings.Join(h.Path, "."), ParamHeaderPrefix, h.Name, err)
		}
		out = append(out, ParamHeaderValue{Header: h.Header, Value: EncodeHeaderValue(v)})
	}
	return out, nil
}

// lookup follows path through nested objects; absent or null is not ok.
// The members are found by scanning (RawMember), with encoding/json for
// what the scan cannot answer.
func lookup(obj json.RawMessage, path []string) (json.RawMessage, bool) {
	for i, name := range path {
		raw, found, ok := RawMember(obj, name)
		if !ok {
			var m map[string]json.RawMessage
			if json.Unmarshal(obj, &m) != nil {
				return nil, false
			}
			raw, found = m[name]
		}
		if !found || string(bytes.TrimSpace(raw)) == "null" {
			return nil, false
		}
		if i == len(path)-1 {
			return raw, true
		}
		obj = raw
	}
	return nil, false
}

// headerText converts an argument to the text its header carries.
func headerText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return "", errors.New("empty")
	case raw[0] == '"':
		if s, ok := PlainString(raw); ok {
			return s, nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	case string(raw) == "true", string(raw) == "false":
		return string(raw), nil
	case raw[0] == '{' || raw[0] == '[':
		return "", errors.New("an object or array is not a primitive value")
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return "", fmt.Errorf("not a JSON value: %s", raw)
	}
	if f != math.Trunc(f) || math.Abs(f) > safeInteger {
		return "", fmt.Errorf("%s is not an integer within ±(2^53-1)", raw)
	}
	return strconv.FormatInt(int64(f), 10), nil
}

// Header values mirrored from a body are sent verbatim when they are
// printable ASCII without surrounding whitespace, and otherwise as
// =?base64?…?= (SEP-2243).
const (
	base64Open  = "=?base64?"
	base64Close = "?="
)

// EncodeHeaderValue encodes a value mirrored into an HTTP header
// (Mcp-Name, Mcp-Param-*): as it is when it is printable ASCII (space
// allowed inside) without leading or trailing whitespace, else, and when
// it looks like the encoded form itself, as =?base64?<UTF-8 in base64>?=.
func EncodeHeaderValue(s string) string {
	plain := len(s) == 0 || (s[0] != ' ' && s[0] != '\t' && s[len(s)-1] != ' ' && s[len(s)-1] != '\t')
	for i := 0; plain && i < len(s); i++ {
		plain = s[i] >= 0x20 && s[i] <= 0x7e
	}
	if plain && !(len(s) >= len(base64Open)+len(base64Close) && strings.HasPrefix(s, base64Open) && strings.HasSuffix(s, base64Close)) {
		return s
	}
	return base64Open + base64.StdEncoding.EncodeToString([]byte(s)) + base64Close
}

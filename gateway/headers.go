package gateway

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Mcp-Param-{Name} headers (SEP-2243): a tool's inputSchema may mark
// properties with x-mcp-header; a client of the stateless era mirrors
// their values into headers, and the gateway checks each against the
// body before the call goes on.

// paramHeader is one x-mcp-header annotation of a tool's input schema.
type paramHeader struct {
	path   []string // the chain of properties keys to the annotated property
	header string   // the Name of Mcp-Param-{Name}
	typ    string   // the property's type: string, integer, number or boolean
}

// paramHeadersOf returns the x-mcp-header annotations of an input schema
// reachable through properties alone (annotations anywhere else are not
// the gateway's to check).
func paramHeadersOf(schema json.RawMessage) []paramHeader {
	if !bytes.Contains(schema, []byte("x-mcp-header")) {
		return nil
	}
	var out []paramHeader
	var walk func(raw json.RawMessage, path []string)
	walk = func(raw json.RawMessage, path []string) {
		var node struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Header     *string                    `json:"x-mcp-header"`
			Type       string                     `json:"type"`
		}
		if json.Unmarshal(raw, &node) != nil {
			return
		}
		if node.Header != nil && len(path) > 0 {
			out = append(out, paramHeader{path: path, header: *node.Header, typ: node.Type})
		}
		for k, v := range node.Properties {
			walk(v, append(path[:len(path):len(path)], k))
		}
	}
	walk(schema, nil)
	return out
}

// checkParamHeaders validates the Mcp-Param-* headers of a tools/call
// against its arguments: each annotated argument present (and not null)
// needs its header, whose value (decoded when Base64) must equal it.
func (pl *pool) checkParamHeaders(h http.Header, params json.RawMessage) *protocol.Error {
	// Most tools annotate no argument: the name alone says so, and the
	// arguments are only read for those that do.
	name, ok := protocol.PlainStringMember(params, "name")
	if !ok {
		var n struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(params, &n) != nil {
			return nil // the call itself will say what is wrong
		}
		name = n.Name
	}
	annotated := pl.naming.current().params[pl.naming.qualifiedTool(name)]
	if len(annotated) == 0 {
		return nil
	}
	p, ok := scanCallParams(params)
	if !ok && json.Unmarshal(params, &p) != nil {
		return nil
	}
	var args any
	if len(p.Arguments) > 0 {
		dec := json.NewDecoder(bytes.NewReader(p.Arguments))
		dec.UseNumber()
		if dec.Decode(&args) != nil {
			return nil
		}
	}
	for _, a := range annotated {
		v, present := valueAt(args, a.path)
		name := "Mcp-Param-" + a.header
		raw, sent := mcpserver.HeaderValue(h, name)
		if !present || v == nil {
			continue // nothing to mirror: a header sent anyway is not the client's promise
		}
		if !sent {
			return errorf(protocol.CodeHeaderMismatch, "the %s header is required: arguments.%s has a value", name, strings.Join(a.path, "."))
		}
		got, err := mcpserver.DecodeHeaderValue(raw)
		if err != nil {
			return errorf(protocol.CodeHeaderMismatch, "the %s header: %v", name, err)
		}
		if !sameValue(got, v) {
			return errorf(protocol.CodeHeaderMismatch, "the %s header (%q) does not match arguments.%s", name, got, strings.Join(a.path, "."))
		}
	}
	return nil
}

// valueAt returns the value at path in v (decoded with UseNumber).
func valueAt(v any, path []string) (any, bool) {
	for _, k := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// sameValue compares a header's decoded value with an argument's:
// strings exactly, booleans as "true"/"false", numbers numerically.
func sameValue(header string, v any) bool {
	switch v := v.(type) {
	case string:
		return header == v
	case bool:
		return header == strconv.FormatBool(v)
	case json.Number:
		want, err1 := strconv.ParseFloat(v.String(), 64)
		got, err2 := strconv.ParseFloat(header, 64)
		return err1 == nil && err2 == nil && !math.IsNaN(got) && got == want
	}
	return false
}

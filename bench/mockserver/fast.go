package mockserver

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// The fast paths of the benchmarked request, tools/call of echo: decoding
// the call's name and text, and encoding the answer, without reflection
// and with few allocations (mcpserver reads the request's _meta its own
// fast way). Each
// handles only the plain shapes a client sends (ASCII member names and
// strings without escapes, no duplicate members that encoding/json would
// merge, no member of the wrong type) and otherwise reports that it did
// not apply, and the caller takes the encoding/json path, which stays the
// reference: whatever a fast path accepts, it decodes exactly as
// encoding/json would (see the tests in fast_test.go).
//
// The input is a request's params, which protocol.Decode has already
// found to be valid JSON: the scanners below rely on that.

// callParams is what callTool reads from a tools/call's params.
type callParams struct {
	Name      string `json:"name"`
	Arguments struct {
		Text string   `json:"text"`
		A    *float64 `json:"a"`
		B    *float64 `json:"b"`
		Ms   int      `json:"ms"`
		// notify's
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		// redescribe's
		Tool string `json:"tool"`
	} `json:"arguments"`
}

// decodeCallParams decodes params into p as json.Unmarshal would, taking
// the fast path when it applies.
func decodeCallParams(params []byte, p *callParams) error {
	if fastCallParams(params, p) {
		return nil
	}
	*p = callParams{}
	return json.Unmarshal(params, p)
}

// fastCallParams decodes params into p when it is an object whose name is
// a plain string (or null) and whose arguments (if any, and not null) is
// an object with at most a plain string text among the members p knows.
// It reports false, leaving p in any state, otherwise.
func fastCallParams(params []byte, p *callParams) bool {
	var name, args []byte
	names, argss := 0, 0
	ok := protocol.EachMember(params, func(k, v []byte) bool {
		switch {
		case foldEqual(k, "name"):
			names++
			name = v
		case foldEqual(k, "arguments"):
			argss++
			args = v
		}
		return true
	})
	if !ok || names > 1 || argss > 1 {
		return false
	}
	*p = callParams{}
	if name != nil && string(name) != "null" {
		s, ok := protocol.PlainString(name)
		if !ok {
			return false
		}
		p.Name = s
	}
	if args == nil || string(args) == "null" {
		return true
	}
	var text []byte
	ok = protocol.EachMember(args, func(k, v []byte) bool {
		switch {
		case foldEqual(k, "text"):
			if string(v) == "null" {
				return true // encoding/json leaves the field as it is
			}
			if v[0] != '"' {
				return false
			}
			text = v
		case foldEqual(k, "a"), foldEqual(k, "b"), foldEqual(k, "ms"), foldEqual(k, "method"), foldEqual(k, "params"), foldEqual(k, "tool"):
			return false
		}
		return true
	})
	if !ok {
		return false
	}
	if text != nil {
		s, ok := protocol.PlainString(text)
		if !ok {
			return false
		}
		p.Arguments.Text = s
	}
	return true
}

// foldEqual reports whether key matches the ASCII name as encoding/json
// matches member names to fields (case-insensitively). Keys are plain
// ASCII here (protocol.EachMember rejects others).
func foldEqual(key []byte, name string) bool {
	if len(key) != len(name) {
		return false
	}
	for i := range len(key) {
		c := key[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

// appendTextResult appends the response to id of a tools/call whose
// result is the one text block text, byte for byte as
// protocol.AppendResult encodes protocol.CallToolResult{Content:
// []protocol.Content{protocol.TextContent(text)}}, and reports true; or
// reports false when text needs escaping or is empty (then the caller
// encodes it the reflective way).
func appendTextResult(b []byte, id protocol.ID, text string) ([]byte, bool) {
	if !safeText(text) {
		return b, false
	}
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	if n, ok := id.Int64(); ok {
		b = strconv.AppendInt(b, n, 10)
	} else {
		enc, _ := id.MarshalJSON()
		b = append(b, enc...)
	}
	b = append(b, `,"result":{"content":[{"type":"text","text":"`...)
	b = append(b, text...)
	return append(b, `"}]}}`...), true
}

// safeText reports whether encoding/json writes text between quotes as it
// is: non-empty printable ASCII without quotes, backslashes or the
// characters it escapes for HTML.
func safeText(text string) bool {
	if text == "" {
		return false
	}
	for i := range len(text) {
		c := text[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// isEchoTool reports whether callTool answers name with the text echo.
func isEchoTool(name string) bool { return name == "echo" || strings.HasPrefix(name, "tool_") }

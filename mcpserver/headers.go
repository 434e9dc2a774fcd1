package mcpserver

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// The stateless era (2026-07-28) over HTTP: a request without a session
// is self-contained. Its _meta carries the protocol version and the
// client's capabilities, and its headers mirror the body for the
// intermediaries in between (SEP-2243): MCP-Protocol-Version, Mcp-Method,
// Mcp-Name (tools/call, prompts/get, resources/read and the tasks
// methods), and whatever HTTPOptions.CheckHeaders checks. checkStateless
// validates all of it before the request is served; the answers to what
// fails are:
//
//	_meta missing, or without protocolVersion or clientCapabilities  400, -32602
//	a protocol version the server does not speak                     400, -32022
//	a header missing, malformed, or not matching the body            400, -32020
//	a method the era removed, or an unknown one                      404, -32601
//
// (the last one once the request is served).

// The HTTP headers of Streamable HTTP.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
	HeaderLastEventID     = "Last-Event-ID"
)

// statelessPost reports whether a POST without a session id carries a
// request of the stateless era: the server speaks it, and the request's
// MCP-Protocol-Version header names a stateless version (or one the
// server does not know), or it has no such header and it is
// server/discover or its _meta names a version.
func (e *eras) statelessPost(h http.Header, m *protocol.Message) bool {
	if !e.modern {
		return false
	}
	if hv := strings.TrimSpace(h.Get(HeaderProtocolVersion)); hv != "" {
		return protocol.UsesDiscover(hv) || !protocol.IsSupported(hv)
	}
	if m.Method == protocol.MethodDiscover {
		return true
	}
	_, ok := metaVersion(m.Params)
	return ok
}

// checkStateless validates a stateless-era request arriving over HTTP:
// its _meta, then its headers against its body.
func (e *eras) checkStateless(h http.Header, m *protocol.Message) (*Meta, *protocol.Error) {
	meta, perr := e.parseMeta(m.Params)
	if perr != nil {
		return nil, perr
	}
	if perr := CheckVersionHeader(h, meta.Version); perr != nil {
		return nil, perr
	}
	if perr := e.checkVersion(meta.Version); perr != nil {
		return nil, perr
	}
	if perr := CheckMethodHeaders(h, m); perr != nil {
		return nil, perr
	}
	return meta, nil
}

// CheckVersionHeader checks a 2026-07-28 request's MCP-Protocol-Version
// header against the version its _meta names: it is required and equal.
func CheckVersionHeader(h http.Header, version string) *protocol.Error {
	hv := strings.TrimSpace(h.Get(HeaderProtocolVersion))
	switch {
	case hv == "":
		return protocol.NewError(protocol.CodeHeaderMismatch, "the MCP-Protocol-Version header is required")
	case hv != version:
		return protocol.NewError(protocol.CodeHeaderMismatch, "the MCP-Protocol-Version header (%q) does not match _meta[%q] (%q)", hv, protocol.MetaProtocolVersion, version)
	}
	return nil
}

// CheckMethodHeaders checks a 2026-07-28 request's Mcp-Method header
// (required, the body's method) and, for the methods that name a tool,
// prompt, resource or task, its Mcp-Name header (required when the body
// has that member, and equal to it once decoded).
func CheckMethodHeaders(h http.Header, m *protocol.Message) *protocol.Error {
	method, ok := HeaderValue(h, HeaderMethod)
	switch {
	case !ok:
		return protocol.NewError(protocol.CodeHeaderMismatch, "the Mcp-Method header is required")
	case method != m.Method:
		return protocol.NewError(protocol.CodeHeaderMismatch, "the Mcp-Method header (%q) does not match the body's method (%q)", method, m.Method)
	}
	field := nameField(m.Method)
	if field == "" {
		return nil
	}
	body, ok := protocol.PlainStringMember(m.Params, field)
	if !ok && !stringMember(m.Params, field, &body) {
		return nil
	}
	name, present := HeaderValue(h, HeaderName)
	if !present {
		return protocol.NewError(protocol.CodeHeaderMismatch, "the Mcp-Name header is required for %s", m.Method)
	}
	decoded, err := DecodeHeaderValue(name)
	if err != nil {
		return protocol.NewError(protocol.CodeHeaderMismatch, "the Mcp-Name header: %v", err)
	}
	if decoded != body {
		return protocol.NewError(protocol.CodeHeaderMismatch, "the Mcp-Name header (%q) does not match params.%s (%q)", decoded, field, body)
	}
	return nil
}

// nameField is the params member Mcp-Name mirrors for method, or "".
func nameField(method string) string {
	switch method {
	case protocol.MethodToolsCall, protocol.MethodPromptsGet:
		return "name"
	case protocol.MethodResourcesRead:
		return "uri"
	case protocol.MethodTasksGet, protocol.MethodTasksUpdate, protocol.MethodTasksCancel:
		return "taskId"
	}
	return ""
}

// stringMember decodes the string member key of params into v, reporting
// whether there was one.
func stringMember(params json.RawMessage, key string, v *string) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(params, &obj) != nil {
		return false
	}
	raw, ok := obj[key]
	return ok && json.Unmarshal(raw, v) == nil
}

// HeaderValue returns a header's value without the optional whitespace
// around it (RFC 9110 §5.5); names match case-insensitively. ok is false
// when the request has no such header.
func HeaderValue(h http.Header, name string) (value string, ok bool) {
	vs := h.Values(name)
	if len(vs) == 0 {
		return "", false
	}
	return strings.Trim(vs[0], " \t"), true
}

// The markers of a Base64-encoded header value (SEP-2243).
const (
	base64Prefix = "=?base64?"
	base64Suffix = "?="
)

// ErrHeaderChars: a header value that is not Base64-encoded has
// characters a header may not carry.
var ErrHeaderChars = errors.New("the value has characters a header may not carry (only visible ASCII, space and tab)")

// DecodeHeaderValue returns the value a Mcp-Name or Mcp-Param-* header
// carries: the UTF-8 text of a =?base64?…?= value (strict Base64,
// padding included), or the value itself, which must be plain visible
// ASCII (ErrHeaderChars otherwise).
func DecodeHeaderValue(v string) (string, error) {
	if len(v) >= len(base64Prefix)+len(base64Suffix) && strings.HasPrefix(v, base64Prefix) && strings.HasSuffix(v, base64Suffix) {
		b, err := base64.StdEncoding.Strict().DecodeString(v[len(base64Prefix) : len(v)-len(base64Suffix)])
		if err != nil {
			return "", fmt.Errorf("invalid Base64: %w", err)
		}
		if !utf8.Valid(b) {
			return "", errors.New("the Base64 value is not UTF-8")
		}
		return string(b), nil
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c != '\t' && (c < 0x20 || c > 0x7e) {
			return "", ErrHeaderChars
		}
	}
	return v, nil
}

// StatelessStatus is the HTTP status of the answer to a stateless-era
// request whose error code is code (0 for a result): 404 for an unknown
// method, 400 for the errors of the request itself (headers, capability,
// version, malformed), 200 otherwise.
func StatelessStatus(code int64) int {
	switch code {
	case protocol.CodeMethodNotFound:
		return http.StatusNotFound
	case protocol.CodeHeaderMismatch, protocol.CodeMissingRequiredClientCapability, protocol.CodeUnsupportedProtocolVersion,
		protocol.CodeInvalidRequest, protocol.CodeParseError:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// frameErrorCode returns the error code of a response frame (0 for a
// result).
func frameErrorCode(frame []byte) int64 {
	raw, found, ok := protocol.RawMember(frame, "error")
	if ok && !found {
		return 0
	}
	var e struct {
		Error *protocol.Error `json:"error"`
	}
	if ok {
		if json.Unmarshal(raw, &e.Error) != nil || e.Error == nil {
			return 0
		}
	} else if json.Unmarshal(frame, &e) != nil || e.Error == nil {
		return 0
	}
	return e.Error.Code
}

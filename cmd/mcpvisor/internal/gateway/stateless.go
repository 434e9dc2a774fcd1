package gateway

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The stateless era (2026-07-28) over HTTP: a request without a session
// is self-contained. Its _meta carries the protocol version and the
// client's capabilities, and its headers mirror the body for the
// intermediaries in between (SEP-2243): MCP-Protocol-Version, Mcp-Method,
// Mcp-Name (tools/call, prompts/get, resources/read and the tasks
// methods) and Mcp-Param-{Name} (tool arguments whose schema carries
// x-mcp-header). checkStateless validates all of it before the request is
// served; the answers to what fails are:
//
//	_meta missing, or without protocolVersion or clientCapabilities  400, -32602
//	a protocol version the gateway does not speak                    400, -32022
//	a header missing, malformed, or not matching the body            400, -32020
//	a method the era removed, or no method at all                    404, -32601
//
// (the last one after validation, when the request is served).

// statelessRequest is what checkStateless learned of a valid request.
type statelessRequest struct {
	version    string
	caps       protocol.ClientCapabilities
	clientInfo protocol.Implementation
	logLevel   protocol.LoggingLevel
}

// isStateless reports whether a POST without a session id is a request of
// the stateless era: its MCP-Protocol-Version header names a stateless
// version (or one the gateway does not know), or it has no such header
// and its _meta names a protocol version.
func isStateless(r *http.Request, m *protocol.Message) bool {
	if hv := strings.TrimSpace(r.Header.Get("Mcp-Protocol-Version")); hv != "" {
		return protocol.UsesDiscover(hv) || !protocol.IsSupported(hv)
	}
	_, ok := metaVersion(m.Params)
	return ok
}

// requestMeta decodes a request's _meta; found is false when params has
// no _meta object.
func requestMeta(params json.RawMessage) (meta protocol.Meta, found bool) {
	raw, ok, scanned := protocol.RawMember(params, "_meta")
	if !scanned {
		var p struct {
			Meta protocol.Meta `json:"_meta"`
		}
		_ = json.Unmarshal(params, &p)
		return p.Meta, p.Meta != nil
	}
	if !ok || json.Unmarshal(raw, &meta) != nil || meta == nil {
		return nil, false
	}
	return meta, true
}

// metaVersion returns the protocol version a request's _meta names.
func metaVersion(params json.RawMessage) (string, bool) {
	meta, _ := requestMeta(params)
	var v string
	return v, meta.Get(protocol.MetaProtocolVersion, &v) && v != ""
}

// checkMeta validates the _meta of a stateless-era request (over any
// transport) and returns what it says; the version it names is checked
// by checkVersion (after the headers, over HTTP: a header that disagrees
// with it is the first thing wrong).
func checkMeta(params json.RawMessage) (statelessRequest, *protocol.Error) {
	var sr statelessRequest
	meta, found := requestMeta(params)
	if !found {
		return sr, errorf(protocol.CodeInvalidParams, "_meta is required in protocol version %s: it must carry %s and %s",
			protocol.Version20260728, protocol.MetaProtocolVersion, protocol.MetaClientCapabilities)
	}
	if !meta.Get(protocol.MetaProtocolVersion, &sr.version) || sr.version == "" {
		return sr, errorf(protocol.CodeInvalidParams, "_meta[%q] is required", protocol.MetaProtocolVersion)
	}
	raw, ok := meta[protocol.MetaClientCapabilities]
	if !ok || json.Unmarshal(raw, &sr.caps) != nil || !isObject(raw) {
		return sr, errorf(protocol.CodeInvalidParams, "_meta[%q] is required (an object; {} declares nothing)", protocol.MetaClientCapabilities)
	}
	meta.Get(protocol.MetaClientInfo, &sr.clientInfo)
	meta.Get(protocol.MetaLogLevel, &sr.logLevel)
	return sr, nil
}

// checkVersion refuses a stateless-era request for a version the gateway
// does not speak.
func (sr statelessRequest) checkVersion() *protocol.Error {
	if !protocol.UsesDiscover(sr.version) || !protocol.IsSupported(sr.version) {
		return unsupportedVersion(sr.version)
	}
	return nil
}

func isObject(raw json.RawMessage) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '{'
	}
	return false
}

// checkStateless validates a stateless-era request arriving over HTTP:
// its _meta, then its headers against its body.
func (g *Gateway) checkStateless(h http.Header, m *protocol.Message) (statelessRequest, *protocol.Error) {
	sr, perr := checkMeta(m.Params)
	if perr != nil {
		return sr, perr
	}
	if perr := mcpserver.CheckVersionHeader(h, sr.version); perr != nil {
		return sr, perr
	}
	if perr := sr.checkVersion(); perr != nil {
		return sr, perr
	}
	if perr := mcpserver.CheckMethodHeaders(h, m); perr != nil {
		return sr, perr
	}
	if m.Method == protocol.MethodToolsCall {
		if perr := g.checkParamHeaders(h, m.Params); perr != nil {
			return sr, perr
		}
	}
	return sr, nil
}

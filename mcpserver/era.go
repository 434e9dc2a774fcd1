package mcpserver

import (
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// The eras. A handshake-era client (2024-11-05 … 2025-11-25) opens a
// session with initialize, and its requests rely on what that said. A
// client of the stateless era (2026-07-28) sends every request
// self-contained: its _meta names the protocol version and the client's
// capabilities (and may name the client and the log level it wants). A
// connection (stdio) belongs to the era of its first request: initialize
// makes it a handshake-era session, a request whose _meta names a version
// makes it a stateless-era one.

// Meta is what the _meta of a request of the stateless era says,
// validated: a protocol version the server speaks, and client
// capabilities.
//
// Concurrency: immutable once made; its maps are shared and must not be
// modified.
type Meta struct {
	// Version is the protocol version the request names.
	Version string
	// ClientCapabilities are the client's capabilities for this request.
	ClientCapabilities protocol.ClientCapabilities
	// ClientInfo names the client ("" when the request does not).
	ClientInfo protocol.Implementation
	// LogLevel is the lowest level of the notifications/message the
	// client wants during this request; "" wants none.
	LogLevel protocol.LoggingLevel
	// size is the JSON text of its capabilities and client info, in
	// bytes: what a connection keeps of it (Options.MaxSessionState).
	size int64
}

// removedMethods are the methods of the handshake eras that 2026-07-28
// removed (and those the tasks extension removed): a stateless-era
// request for one is answered -32601 (over HTTP, 404).
var removedMethods = []string{
	protocol.MethodInitialize, protocol.MethodPing, protocol.MethodLoggingSetLevel,
	protocol.MethodResourcesSubscribe, protocol.MethodResourcesUnsubscribe,
	protocol.MethodTasksResult, protocol.MethodTasksList,
}

// RemovedInStateless reports whether method is one the stateless era
// (2026-07-28) removed, or one the tasks extension removed: such a
// request is answered -32601 (over HTTP, 404).
func RemovedInStateless(method string) bool { return slices.Contains(removedMethods, method) }

// errMetaMissing is the answer to a stateless-era request without _meta.
func errMetaMissing() *protocol.Error {
	return protocol.NewError(protocol.CodeInvalidParams, "_meta is required in protocol version %s: it must carry %s and %s",
		protocol.Version20260728, protocol.MetaProtocolVersion, protocol.MetaClientCapabilities)
}

// rawMeta returns the raw _meta object of params; found is false when
// params has none (or it is null).
func rawMeta(params json.RawMessage) (raw json.RawMessage, found bool) {
	if len(params) == 0 {
		return nil, false
	}
	raw, found, scanned := protocol.RawMember(params, "_meta")
	if !scanned {
		// Member names in other cases, or the member twice: what
		// encoding/json makes of it (case-insensitive names, objects
		// merged, a later null resetting).
		var p struct {
			Meta protocol.Meta `json:"_meta"`
		}
		if json.Unmarshal(params, &p) != nil || p.Meta == nil {
			return nil, false
		}
		raw, _ = json.Marshal(p.Meta)
		found = true
	}
	if !found || !isObject(raw) {
		return nil, false
	}
	return raw, true
}

// metaVersion returns the protocol version a request's _meta names.
func metaVersion(params json.RawMessage) (string, bool) {
	raw, ok := rawMeta(params)
	if !ok {
		return "", false
	}
	f, _ := scanMeta(raw)
	return f.version, f.version != ""
}

// metaFields are the members of a _meta that matter here, raw.
type metaFields struct {
	version, logLevel string
	caps, info        json.RawMessage
	hasCaps           bool
}

// scanMeta reads the members of a _meta object (later duplicates win, as
// encoding/json's map decoding has it). ok is false when the object could
// not be read.
func scanMeta(raw json.RawMessage) (f metaFields, ok bool) {
	if protocol.EachMember(raw, func(k, v []byte) bool {
		f.visit(k, v) // (string(k) in a switch does not allocate)
		return true
	}) {
		return f, true
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return f, false
	}
	for k, v := range m {
		f.visit([]byte(k), v)
	}
	return f, true
}

// visit reads member k of a _meta, if it is one of the protocol's.
func (f *metaFields) visit(k, v []byte) {
	switch string(k) {
	case protocol.MetaProtocolVersion:
		f.version = metaString(v)
	case protocol.MetaClientCapabilities:
		f.caps, f.hasCaps = v, true
	case protocol.MetaClientInfo:
		f.info = v
	case protocol.MetaLogLevel:
		f.logLevel = metaString(v)
	}
}

// knownMetaStrings are the JSON strings a _meta carries with every request
// (protocol versions, log levels), so that reading them allocates nothing.
var knownMetaStrings = func() map[string]string {
	m := map[string]string{}
	for _, v := range protocol.SupportedVersions() {
		m[`"`+v+`"`] = v
	}
	for _, l := range []protocol.LoggingLevel{protocol.LevelDebug, protocol.LevelInfo, protocol.LevelNotice, protocol.LevelWarning,
		protocol.LevelError, protocol.LevelCritical, protocol.LevelAlert, protocol.LevelEmergency} {
		m[`"`+string(l)+`"`] = string(l)
	}
	return m
}()

// metaString reads a JSON string of a _meta.
func metaString(v []byte) string {
	if s, ok := knownMetaStrings[string(v)]; ok {
		return s
	}
	if s, plain := protocol.PlainString(v); plain {
		return s
	}
	var s string
	_ = json.Unmarshal(v, &s)
	return s
}

// memo remembers the last value decoded from one raw JSON text: clients
// send the same capabilities and client info with every request.
//
// Concurrency: safe for concurrent use (one atomic pointer).
type memo[T any] struct{ last atomic.Pointer[memoEntry[T]] }

type memoEntry[T any] struct {
	raw string
	v   T
}

// cached returns the value kept for raw, if raw is the last text kept.
func (m *memo[T]) cached(raw json.RawMessage) (T, bool) {
	if e := m.last.Load(); e != nil && e.raw == string(raw) {
		return e.v, true
	}
	var zero T
	return zero, false
}

// keep remembers v as the value of raw.
func (m *memo[T]) keep(raw json.RawMessage, v T) {
	m.last.Store(&memoEntry[T]{raw: string(raw), v: v})
}

// decode returns raw decoded into a T, and false when it does not decode.
func (m *memo[T]) decode(raw json.RawMessage) (T, bool) {
	if e := m.last.Load(); e != nil && e.raw == string(raw) {
		return e.v, true
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, false
	}
	m.last.Store(&memoEntry[T]{raw: string(raw), v: v})
	return v, true
}

// eras are the protocol versions a Server speaks and what each era asks
// of a request: the versions an initialize or a server/discover gets,
// and the validation of a stateless-era request's _meta (and, over HTTP,
// of its headers against it).
//
// Concurrency: immutable after New but for the memos (atomic), so used
// from every transport's goroutines at once.
type eras struct {
	versions  []string // Options.Versions, newest first
	modern    bool     // a stateless-era version is served
	handshake bool     // a handshake-era version is served
	budget    *budget  // the _meta's size is checked against MaxSessionState

	caps  memo[protocol.ClientCapabilities] // the last clientCapabilities decoded
	infos memo[protocol.Implementation]     // the last clientInfo decoded
	metas memo[*Meta]                       // the last valid _meta parsed (clients send the same one with every request)
}

// parseMeta validates the _meta of a stateless-era request: it must name
// a protocol version and carry the client's capabilities (an object; {}
// declares nothing). The version itself is checked by checkVersion.
func (e *eras) parseMeta(params json.RawMessage) (*Meta, *protocol.Error) {
	raw, found := rawMeta(params)
	if !found {
		return nil, errMetaMissing()
	}
	if m, ok := e.metas.cached(raw); ok {
		return m, nil
	}
	f, ok := scanMeta(raw)
	if !ok {
		return nil, errMetaMissing()
	}
	if f.version == "" {
		return nil, protocol.NewError(protocol.CodeInvalidParams, "_meta[%q] is required", protocol.MetaProtocolVersion)
	}
	m := &Meta{Version: f.version, LogLevel: protocol.LoggingLevel(f.logLevel), size: int64(len(f.caps) + len(f.info))}
	if e.budget.maxState > 0 && m.size > e.budget.maxState {
		e.budget.stateRefused.Add(1)
		return nil, stateError("_meta", boundSession, e.budget.maxState, m.size)
	}
	switch {
	case !f.hasCaps || !isObject(f.caps):
		return nil, protocol.NewError(protocol.CodeInvalidParams, "_meta[%q] is required (an object; {} declares nothing)", protocol.MetaClientCapabilities)
	case !isEmptyObject(f.caps):
		if m.ClientCapabilities, ok = e.caps.decode(f.caps); !ok {
			return nil, protocol.NewError(protocol.CodeInvalidParams, "_meta[%q] is not a capabilities object", protocol.MetaClientCapabilities)
		}
	}
	if len(f.info) > 0 {
		m.ClientInfo, _ = e.infos.decode(f.info)
	}
	e.metas.keep(raw, m)
	return m, nil
}

// checkVersion refuses a stateless-era request for a version the server
// does not speak.
func (e *eras) checkVersion(v string) *protocol.Error {
	if !protocol.UsesDiscover(v) || !slices.Contains(e.versions, v) {
		return e.unsupportedVersion(v)
	}
	return nil
}

// unsupportedVersion is the -32022 error naming the stateless-era
// versions the server speaks.
func (e *eras) unsupportedVersion(requested string) *protocol.Error {
	perr := protocol.NewError(protocol.CodeUnsupportedProtocolVersion, "unsupported protocol version %q", requested)
	perr.Data, _ = json.Marshal(protocol.UnsupportedProtocolVersionData{Supported: e.modernVersions(), Requested: requested})
	return perr
}

// modernVersions returns the stateless-era versions the server speaks,
// newest first.
func (e *eras) modernVersions() []string {
	out := []string{}
	for _, v := range e.versions {
		if protocol.UsesDiscover(v) {
			out = append(out, v)
		}
	}
	return out
}

// negotiate returns the version an initialize that offered offered gets:
// the offered one when the server speaks it, else the newest handshake
// version it speaks.
func (e *eras) negotiate(offered string) string {
	newest := ""
	for _, v := range e.versions {
		if protocol.UsesDiscover(v) {
			continue
		}
		if v == offered {
			return v
		}
		if newest == "" {
			newest = v
		}
	}
	if newest == "" {
		newest = protocol.LatestHandshakeVersion
	}
	return newest
}

// levelRank orders logging levels; -1 for an unknown one.
func levelRank(l protocol.LoggingLevel) int {
	for i, v := range []protocol.LoggingLevel{protocol.LevelDebug, protocol.LevelInfo, protocol.LevelNotice,
		protocol.LevelWarning, protocol.LevelError, protocol.LevelCritical, protocol.LevelAlert, protocol.LevelEmergency} {
		if strings.EqualFold(string(l), string(v)) {
			return i
		}
	}
	return -1
}

// isObject reports whether raw (valid JSON) is an object.
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

// isEmptyObject reports whether raw (valid JSON) is {}.
func isEmptyObject(raw json.RawMessage) bool {
	n := 0
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			if n != 0 {
				return false
			}
		case '}':
			if n != 1 {
				return false
			}
		default:
			return false
		}
		n++
	}
	return n == 2
}

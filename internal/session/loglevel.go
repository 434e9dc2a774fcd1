package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// The log level a client asks a server for travels differently by era:
// in the handshake eras it is the request logging/setLevel, which sets
// the level for the rest of the session; in the stateless era
// (2026-07-28) there is no such request, and each request carries the
// level in its _meta (io.modelcontextprotocol/logLevel): a server sends
// log messages about a request only at or above the level that request
// names, and none without one.

// ErrInvalidLogLevel: a level that is not one of the eight of the
// specification (debug, info, notice, warning, error, critical, alert,
// emergency).
var ErrInvalidLogLevel = errors.New("mcp: invalid log level")

// ErrNoLogging: a server of a handshake era that did not declare the
// logging capability has no logging/setLevel to send.
var ErrNoLogging = errors.New("mcp: the server declared no logging capability")

// leveledMeta is the stateless-era _meta with a log level, and its
// encoding. Immutable once stored.
type leveledMeta struct {
	meta protocol.Meta
	json json.RawMessage
}

// eraMeta holds the _meta members every stateless-era request carries
// (2026-07-28: protocol version, client info and capabilities, and the
// log level once the host set one), encoded once, and encodes the _meta of
// each request from them. In the handshake eras modern is nil and the
// _meta of a request is what its caller gave.
//
// Concurrency: modern and modernJSON are written by the negotiation in
// Open before the session is returned, and only read afterwards. leveled,
// level and caps are atomic pointers to immutable values; mu orders two
// setLevel at once.
type eraMeta struct {
	modern     protocol.Meta   // nil in the handshake eras
	modernJSON json.RawMessage // modern, encoded once
	// leveled is modern with the log level the host asked for
	// (SetLogLevel), once it did; see stateless.
	leveled atomic.Pointer[leveledMeta]
	level   atomic.Pointer[protocol.LoggingLevel] // see Session.LogLevel
	// caps is the last _meta encoded with a request's own capabilities
	// (see capsmeta.go).
	caps atomic.Pointer[capsMeta]
	mu   sync.Mutex
}

// stateless returns the _meta members of every stateless-era request:
// the negotiated ones, with the log level once one was set; nil in the
// handshake eras. The map is shared: never modify it.
func (e *eraMeta) stateless() protocol.Meta {
	if l := e.leveled.Load(); l != nil {
		return l.meta
	}
	return e.modern
}

// statelessJSON is stateless, encoded.
func (e *eraMeta) statelessJSON() json.RawMessage {
	if l := e.leveled.Load(); l != nil {
		return l.json
	}
	return e.modernJSON
}

// withMeta gives a request without params the stateless-era _meta
// members. Typed requests set their Meta with options instead; params
// passed to Call by others are sent as they are.
func (e *eraMeta) withMeta(params any) any {
	if e.modern == nil || params != nil {
		return params
	}
	return protocol.PingParams{Meta: e.stateless()}
}

// options returns the _meta for a typed request with options: o.Meta in
// the handshake eras; otherwise o.Meta merged over the stateless-era
// members, the client capabilities replaced by o.Capabilities when set.
func (e *eraMeta) options(o RequestOptions) protocol.Meta {
	if e.modern == nil {
		return o.Meta
	}
	base := e.stateless()
	out := make(protocol.Meta, len(base)+len(o.Meta))
	for k, v := range base {
		out[k] = v
	}
	if o.Capabilities != nil {
		if raw, err := json.Marshal(o.Capabilities); err == nil {
			out[protocol.MetaClientCapabilities] = raw
		}
	}
	for k, v := range o.Meta {
		out[k] = v
	}
	return out
}

// setLevel makes every stateless-era request from now on carry level.
func (e *eraMeta) setLevel(level protocol.LoggingLevel) error {
	meta := make(protocol.Meta, len(e.modern)+1)
	for k, v := range e.modern {
		meta[k] = v
	}
	raw, err := json.Marshal(level)
	if err != nil {
		return err
	}
	meta[protocol.MetaLogLevel] = raw
	encoded, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	e.mu.Lock() // two setLevel at once: the last to store wins both
	e.leveled.Store(&leveledMeta{meta: meta, json: encoded})
	e.level.Store(&level)
	e.mu.Unlock()
	return nil
}

// LogLevel returns the level the session asks the server for: the last
// SetLogLevel (or Options.LogLevel) that took effect; empty if none.
func (s *Session) LogLevel() protocol.LoggingLevel {
	if p := s.meta.level.Load(); p != nil {
		return *p
	}
	return ""
}

// SetLogLevel asks the server for log messages at level and above from
// now on. In the handshake eras it sends logging/setLevel and returns
// the server's answer (ErrNoLogging, without sending anything, when the
// server declared no logging capability). In the stateless era every
// request sent from now on carries the level in its _meta; nothing is
// sent now. Safe for concurrent use with requests: a request already on
// its way keeps the level it was sent with.
func (s *Session) SetLogLevel(ctx context.Context, level protocol.LoggingLevel) error {
	if !level.Valid() {
		return fmt.Errorf("%w: %q", ErrInvalidLogLevel, level)
	}
	if s.meta.modern != nil {
		return s.meta.setLevel(level)
	}
	if s.peer.Capabilities.Logging == nil {
		return ErrNoLogging
	}
	if err := s.Call(ctx, protocol.MethodLoggingSetLevel, protocol.SetLevelParams{Level: level}, nil); err != nil {
		return err
	}
	s.meta.level.Store(&level)
	return nil
}

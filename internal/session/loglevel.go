package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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

// statelessMeta returns the _meta members of every stateless-era
// request: the negotiated ones, with the log level once one was set; nil
// in the handshake eras. The map is shared: never modify it.
func (s *Session) statelessMeta() protocol.Meta {
	if l := s.leveled.Load(); l != nil {
		return l.meta
	}
	return s.modernMeta
}

// statelessMetaJSON is statelessMeta, encoded.
func (s *Session) statelessMetaJSON() json.RawMessage {
	if l := s.leveled.Load(); l != nil {
		return l.json
	}
	return s.modernMetaJSON
}

// LogLevel returns the level the session asks the server for: the last
// SetLogLevel (or Options.LogLevel) that took effect; empty if none.
func (s *Session) LogLevel() protocol.LoggingLevel {
	if p := s.logLevel.Load(); p != nil {
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
	if s.modernMeta == nil {
		if s.capabilities.Logging == nil {
			return ErrNoLogging
		}
		if err := s.Call(ctx, protocol.MethodLoggingSetLevel, protocol.SetLevelParams{Level: level}, nil); err != nil {
			return err
		}
		s.logLevel.Store(&level)
		return nil
	}
	meta := make(protocol.Meta, len(s.modernMeta)+1)
	for k, v := range s.modernMeta {
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
	s.mu.Lock() // two SetLogLevel at once: the last to store wins both
	s.leveled.Store(&leveledMeta{meta: meta, json: encoded})
	s.logLevel.Store(&level)
	s.mu.Unlock()
	return nil
}

// initialLogLevel applies Options.LogLevel once the session is
// negotiated. A server that refuses it still serves: the refusal is
// logged.
func (s *Session) initialLogLevel(ctx context.Context) {
	level := s.opts.LogLevel
	if level == "" {
		return
	}
	if err := s.SetLogLevel(ctx, level); err != nil && !errors.Is(err, ErrNoLogging) {
		s.log.Warn().Err(err).Str("level", string(level)).Msg("the server did not take the log level")
	}
}

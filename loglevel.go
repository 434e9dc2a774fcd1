package mcpvisor

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// SetLogLevel asks a server for its log messages at level and above
// (they arrive as LogMessageEvent), from now on and on every later
// connection of the server. How the level travels depends on the
// server's protocol era: a server of 2025-11-25 or before is sent
// logging/setLevel (ErrNoLogging when it declared no logging capability;
// its own refusal comes back as a *protocol.Error); a 2026-07-28 server,
// which has no such request, gets the level in the _meta of every request
// sent to it from then on (io.modelcontextprotocol/logLevel). A server
// that is not connected gets it when it connects, and SetLogLevel returns
// nil. ErrUnknownServer for a name not configured, ErrInvalidLogLevel
// for a level not of the specification.
func (s *Supervisor) SetLogLevel(ctx context.Context, server string, level protocol.LoggingLevel) error {
	if !level.Valid() {
		return fmt.Errorf("%w: %q", session.ErrInvalidLogLevel, level)
	}
	h, err := s.handle(server)
	if err != nil {
		return err
	}
	h.logLevel.Store(&level)
	v, err := ready(h)
	if err != nil {
		return nil // a connect in progress takes it when installed (logLevelAfterConnect)
	}
	ctx, cancel := withDefaultTimeout(ctx, s.callTimeout(h))
	defer cancel()
	return hostErr(v.sess.SetLogLevel(ctx, level))
}

// logLevelOf is the level the host asked for server h ("" if none).
func logLevelOf(h *serverHandle) protocol.LoggingLevel {
	if p := h.logLevel.Load(); p != nil {
		return *p
	}
	return ""
}

// logLevelAfterConnect gives the session just installed the level the
// host asked for while it was connecting (its options carried the level
// of when the attempt started).
func (a *serverActor) logLevelAfterConnect() {
	level, sess := logLevelOf(a.h), a.sess
	if level == "" || sess.LogLevel() == level {
		return
	}
	timeout := a.connectTimeout()
	log := a.log
	a.goroutines.start("server.log-level", func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := sess.SetLogLevel(ctx, level); err != nil && !errors.Is(err, session.ErrNoLogging) {
			log.Warn().Err(err).Str("level", string(level)).Msg("the server did not take the log level")
		}
	})
}

// Errors of SetLogLevel.
var (
	// ErrInvalidLogLevel: a level other than debug, info, notice,
	// warning, error, critical, alert or emergency.
	ErrInvalidLogLevel = session.ErrInvalidLogLevel
	// ErrNoLogging: the server (of a protocol era before 2026-07-28)
	// declared no logging capability, so it has no level to set.
	ErrNoLogging = session.ErrNoLogging
)

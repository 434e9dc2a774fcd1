package actors

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/session"
)

// SetLogLevel asks server for log messages at level and above (they
// arrive as EventLogMessage), from now on and on every later connection:
// logging/setLevel for a server of a handshake era (session.ErrNoLogging
// when it declared no logging capability), the level in every request's
// _meta for a 2026-07-28 server. A server not ready gets it when it
// connects; then nil is returned. The server's refusal is returned as
// its *protocol.Error.
func (s *System) SetLogLevel(ctx context.Context, server string, level protocol.LoggingLevel) error {
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
	return v.sess.SetLogLevel(ctx, level)
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
	a.goroutine("server.log-level", func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := sess.SetLogLevel(ctx, level); err != nil && !errors.Is(err, session.ErrNoLogging) {
			log.Warn().Err(err).Str("level", string(level)).Msg("the server did not take the log level")
		}
	})
}

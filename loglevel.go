package mcpvisor

import (
	"context"
	"errors"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

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

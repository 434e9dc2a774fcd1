package mcpvisor

import (
	"context"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/session"
)

// Errors of SetLogLevel.
var (
	// ErrInvalidLogLevel: a level other than debug, info, notice,
	// warning, error, critical, alert or emergency.
	ErrInvalidLogLevel = session.ErrInvalidLogLevel
	// ErrNoLogging: the server (of a protocol era before 2026-07-28)
	// declared no logging capability, so it has no level to set.
	ErrNoLogging = session.ErrNoLogging
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
	return hostErr(s.sys.SetLogLevel(ctx, server, level))
}

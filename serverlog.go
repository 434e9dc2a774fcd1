package mcpvisor

import "github.com/rs/zerolog"

// serverLogger returns log with the field server=name on every event.
// The field is added by a hook, not to the logger's context: a context
// (zerolog's With) costs each server a 500-byte buffer for as long as it
// exists, logging or not.
func serverLogger(log zerolog.Logger, name string) zerolog.Logger {
	return log.Hook(serverField(name))
}

// serverField is the hook of serverLogger.
type serverField string

// Run implements zerolog.Hook.
func (f serverField) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str("server", string(f))
}

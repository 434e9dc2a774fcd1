package mcpvisor

// The transports a host gets: each package registers its kind in the
// table of package transports when it is linked, and the server actor
// dials, authorizes and traces a server by its kind's entry there. A new
// transport is its package plus one line here.
import (
	_ "github.com/mcpvisor/mcpvisor/transports/inproc"
	_ "github.com/mcpvisor/mcpvisor/transports/sse"
	_ "github.com/mcpvisor/mcpvisor/transports/stdio"
	_ "github.com/mcpvisor/mcpvisor/transports/streamable"
	_ "github.com/mcpvisor/mcpvisor/transports/ws"
)

package main

import (
	"strconv"
	"time"

	"github.com/mcpvisor/mcpvisor"
)

// applyEnvOptions sets the supervisor options that Claude Code's
// environment variables name, where the command line left them zero:
// $MCP_SERVER_CONNECTION_BATCH_SIZE and
// $MCP_REMOTE_SERVER_CONNECTION_BATCH_SIZE (connects at once, local and
// remote), $MCP_TIMEOUT and $MCP_TOOL_TIMEOUT (connect and call
// deadlines, milliseconds). A value that is not a positive integer is
// ignored. The library itself reads no environment variable.
func applyEnvOptions(o *mcpvisor.Options, getenv func(string) string) {
	positive := func(name string) (int, bool) {
		n, err := strconv.Atoi(getenv(name))
		return n, err == nil && n > 0
	}
	if n, ok := positive("MCP_SERVER_CONNECTION_BATCH_SIZE"); ok && o.LocalConnectLimit == 0 {
		o.LocalConnectLimit = n
	}
	if n, ok := positive("MCP_REMOTE_SERVER_CONNECTION_BATCH_SIZE"); ok && o.RemoteConnectLimit == 0 {
		o.RemoteConnectLimit = n
	}
	if n, ok := positive("MCP_TIMEOUT"); ok && o.ConnectTimeout == 0 {
		o.ConnectTimeout = time.Duration(n) * time.Millisecond
	}
	if n, ok := positive("MCP_TOOL_TIMEOUT"); ok && o.CallTimeout == 0 {
		o.CallTimeout = time.Duration(n) * time.Millisecond
	}
}

// hasBrowser reports whether an authorization URL can be opened in the
// user's browser: there is a graphical session to open it in. Without
// one the URL is only printed, for the user to open elsewhere. The
// library takes the opener as an option and looks at no environment
// variable.
func hasBrowser(goos string, getenv func(string) string) bool {
	return goos == "darwin" || goos == "windows" || getenv("DISPLAY") != "" || getenv("WAYLAND_DISPLAY") != ""
}

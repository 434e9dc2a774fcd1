package mcpvisor

import "github.com/mcpvisor/mcpvisor/internal/userdirs"

// StateDir returns the user's mcpvisor state directory, where files kept
// between runs belong (approvals, lock files): $XDG_STATE_HOME/mcpvisor
// or ~/.local/state/mcpvisor on Linux, ~/Library/Application
// Support/mcpvisor on macOS, %LOCALAPPDATA%\mcpvisor on Windows (local to
// the machine: it does not roam). It is not created; create it with mode
// 0700 (on Windows, give it an owner-only DACL).
func StateDir() (string, error) { return userdirs.StateDir() }

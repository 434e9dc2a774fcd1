package trust

import (
	"fmt"

	"github.com/mcpvisor/mcpvisor/internal/userdirs"
)

// DefaultDir is the default state directory, by each platform's
// conventions (internal/userdirs): $XDG_STATE_HOME/mcpvisor or
// ~/.local/state/mcpvisor on Linux, ~/Library/Application
// Support/mcpvisor on macOS, %LOCALAPPDATA%\mcpvisor on Windows. A host
// may pass its own directory instead.
func DefaultDir() (string, error) {
	d, err := userdirs.StateDir()
	if err != nil {
		return "", fmt.Errorf("trust: finding the state directory: %w", err)
	}
	return d, nil
}

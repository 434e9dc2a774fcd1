package trust

import (
	"fmt"
	"os"
	"path/filepath"
)

// DefaultDir is the default state directory: <home>/.local/state/mcpvisor
// (the XDG state location, without reading $XDG_STATE_HOME: the library
// reads no environment variable; a host may pass its own directory).
// It is the one place that decides the default, so that it can be made
// per platform.
func DefaultDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("trust: finding the state directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "mcpvisor"), nil
}

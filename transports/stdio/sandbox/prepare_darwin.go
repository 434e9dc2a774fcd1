//go:build darwin

package sandbox

import (
	"errors"
	"fmt"
	"os"

	"github.com/mcpvisor/mcpvisor/transports"
)

// sandboxExec is macOS's Seatbelt front end.
const sandboxExec = "/usr/bin/sandbox-exec"

func platformMechanisms() []transports.SandboxMechanism {
	return []transports.SandboxMechanism{transports.SandboxSeatbelt}
}

func platformName() string { return "darwin" }

func check(m transports.SandboxMechanism, cfg *transports.Sandbox, opts *Options) error {
	if m != transports.SandboxSeatbelt {
		return errors.New("not available on darwin (Linux only)")
	}
	if _, err := os.Stat(sandboxExec); err != nil {
		return fmt.Errorf("%s: %w", sandboxExec, err)
	}
	return nil
}

// build runs the server under sandbox-exec with its profile. The limits
// are not applied on macOS (there is no exec stage there yet).
func build(plan *Plan, v view, cfg *transports.Sandbox, cmd Command, opts *Options) error {
	if len(cmd.Argv) == 0 {
		return errNoCommand
	}
	dir, err := os.MkdirTemp("/tmp", "mcpvisor-sandbox-")
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	plan.TempDir = dir
	plan.Env = []string{"TMPDIR=" + dir, "TMP=" + dir, "TEMP=" + dir}
	plan.Path = sandboxExec
	plan.Argv = append([]string{sandboxExec, "-p", SeatbeltProfile(v.home, v.read, v.write, dir, cfg.Network), cmd.Path}, cmd.Argv[1:]...)
	return nil
}

var errNoCommand = errors.New("sandbox: no command")

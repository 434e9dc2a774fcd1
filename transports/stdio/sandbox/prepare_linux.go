package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/mcpvisor/mcpvisor/transports"
)

// platformMechanisms are auto's candidates, strongest first: bubblewrap
// adds PID and network namespaces (UDP and abstract sockets included) and
// a private /tmp to what Landlock does.
func platformMechanisms() []transports.SandboxMechanism {
	return []transports.SandboxMechanism{transports.SandboxBwrap, transports.SandboxLandlock}
}

func platformName() string { return "linux" }

// check reports why mechanism m cannot confine a server with cfg here.
func check(m transports.SandboxMechanism, cfg *transports.Sandbox, opts *Options) error {
	switch m {
	case transports.SandboxLandlock:
		return checkLandlock(cfg.Network)
	case transports.SandboxBwrap:
		return checkBwrap(opts)
	}
	return fmt.Errorf("not available on linux")
}

// build fills the plan of the chosen mechanism.
func build(plan *Plan, v view, cfg *transports.Sandbox, cmd Command, opts *Options) error {
	if len(cmd.Argv) == 0 {
		return errNoCommand
	}
	switch plan.Mechanism {
	case transports.SandboxLandlock:
		dir, err := privateTempDir(v.home)
		if err != nil {
			return err
		}
		plan.tempDir = dir
		plan.Path, plan.Argv = cmd.Path, cmd.Argv
		plan.Env = append(tempEnv(dir), cacheEnv(v, cmd, dir)...)
		plan.Landlock = landlockRuleset(v, dir, cfg.Network)
	case transports.SandboxBwrap:
		bwrap, err := findBwrap(opts)
		if err != nil {
			return &UnavailableError{Requested: plan.Mechanism, Reasons: []string{err.Error()}}
		}
		plan.Path = bwrap
		plan.Argv = bwrapArgs(bwrap, v, cfg.Network, cmd)
		plan.Env = append(tempEnv("/tmp"), cacheEnv(v, cmd, "/tmp")...) // the sandbox's own /tmp
	}
	if prlimit := findPrlimit(); prlimit != "" && !opts.ExecStage {
		direct(plan, prlimit)
	}
	return nil
}

// tempEnv points the usual variables at a temporary directory.
func tempEnv(dir string) []string {
	return []string{"TMPDIR=" + dir, "TMP=" + dir, "TEMP=" + dir}
}

// privateTempDir makes a server's private temporary directory in a
// directory of this user's alone that confined servers cannot read (each
// sees only its own): <home>/.cache/mcpvisor/sandbox-tmp when the home
// directory (hidden anyway) is writable, else
// /tmp/mcpvisor-sandbox-<uid> (which the Landlock rules must then carve
// out of /tmp: one rule per other entry of /tmp).
func privateTempDir(home string) (string, error) {
	root := filepath.Join(home, ".cache", "mcpvisor", "sandbox-tmp")
	if home == "" || home == "/" || os.MkdirAll(root, 0o700) != nil {
		root = filepath.Join("/tmp", "mcpvisor-sandbox-"+strconv.Itoa(os.Getuid()))
	}
	if err := os.Mkdir(root, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("sandbox: creating %s: %w", root, err)
	}
	// Someone else's directory, or a link, in a world-writable /tmp must
	// not become a server's TMPDIR.
	fi, err := os.Lstat(root)
	if err != nil {
		return "", fmt.Errorf("sandbox: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("sandbox: %s is not a private directory of this user", root)
	}
	dir, err := os.MkdirTemp(root, "s-")
	if err != nil {
		return "", fmt.Errorf("sandbox: %w", err)
	}
	return dir, nil
}

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

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
		dir, err := privateTempDir(v.home, opts.RuntimeDir)
		if err != nil {
			return err
		}
		plan.TempDir = dir
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
	plan.NoNetwork = !cfg.Network
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
// sees only its own), the first of: <runtime>/mcpvisor-sandbox when the
// user's runtime directory is a private tmpfs (fast: no disk);
// <home>/.cache/mcpvisor/sandbox-tmp when the home directory (hidden
// anyway) is writable; /tmp/mcpvisor-sandbox-<uid>. Outside the home
// directory, the Landlock rules carve the directory out of its parent:
// one rule per other entry of the parent.
func privateTempDir(home, runtime string) (string, error) {
	uid := os.Getuid()
	var root string
	if runtime == "" {
		runtime = "/run/user/" + strconv.Itoa(uid)
	}
	if privateTmpfs(runtime, uid) {
		root = filepath.Join(runtime, "mcpvisor-sandbox")
	} else {
		root = filepath.Join(home, ".cache", "mcpvisor", "sandbox-tmp")
		if home == "" || home == "/" || os.MkdirAll(root, 0o700) != nil {
			root = filepath.Join("/tmp", "mcpvisor-sandbox-"+strconv.Itoa(uid))
		}
	}
	if err := os.Mkdir(root, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("sandbox: creating %s: %w", root, err)
	}
	// Someone else's directory, or a link, in a world-writable /tmp must
	// not become a server's TMPDIR.
	if !ownPrivateDir(root, uid) {
		return "", fmt.Errorf("sandbox: %s is not a private directory of this user", root)
	}
	dir, err := os.MkdirTemp(root, "s-")
	if err != nil {
		return "", fmt.Errorf("sandbox: %w", err)
	}
	return dir, nil
}

// ownPrivateDir reports whether path is a directory (not a link) of the
// user uid that no one else may enter (mode 0700 or stricter).
func ownPrivateDir(path string, uid int) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return fi.IsDir() && ok && int(st.Uid) == uid && fi.Mode().Perm()&0o077 == 0
}

// privateTmpfs reports whether dir is a tmpfs directory of the user uid
// alone: a runtime directory as systemd-logind makes it. One in /dev/shm
// is not (every Landlock-confined server may write /dev/shm).
func privateTmpfs(dir string, uid int) bool {
	if !filepath.IsAbs(dir) || inside(filepath.Clean(dir), "/dev") || !ownPrivateDir(dir, uid) {
		return false
	}
	var fs unix.Statfs_t
	return unix.Statfs(dir, &fs) == nil && fs.Type == unix.TMPFS_MAGIC
}

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox/confine"
)

// bwrapProbeTimeout bounds the trial run that tells whether bubblewrap
// works here.
const bwrapProbeTimeout = 10 * time.Second

// bwrapProbes caches, per bwrap binary, whether a trial run worked (nil)
// or why not.
var bwrapProbes sync.Map // path → func() error (a sync.OnceValue)

// findBwrap returns the bubblewrap binary to use.
func findBwrap(opts *Options) (string, error) {
	name := opts.Bwrap
	if name == "" {
		name = "bwrap"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not found (install bubblewrap)", name)
	}
	return filepath.Abs(p)
}

// checkBwrap reports whether bubblewrap can confine a server here: it is
// installed, and a trial sandbox with the namespaces a server gets starts
// (Ubuntu 24.04's AppArmor policy, for one, stops unprivileged user
// namespaces, which bwrap needs when it is not setuid). The trial runs
// once per process.
func checkBwrap(opts *Options) error {
	path, err := findBwrap(opts)
	if err != nil {
		return err
	}
	probe, _ := bwrapProbes.LoadOrStore(path, sync.OnceValue(func() error { return probeBwrap(path) }))
	return probe.(func() error)()
}

func probeBwrap(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), bwrapProbeTimeout)
	defer cancel()
	args := append(bwrapBase(false), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
		"--", path, "--version")
	cmd := exec.CommandContext(ctx, path, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 300 {
			msg = msg[:300]
		}
		return fmt.Errorf("a trial sandbox failed (%v): %s", err, msg)
	}
	return nil
}

// bwrapBase are the options every sandbox gets: the sandbox dies with
// its parent (the reaper), runs in a new session (no TIOCSTI into a
// terminal), in its own user namespace with no capability (bwrap drops
// them for an unprivileged user; root's are dropped by --cap-drop ALL,
// or the server could unmount what hides the home directory), in its
// own PID (it sees and signals only its own processes), IPC and UTS
// namespaces, and without network unless allowed.
func bwrapBase(network bool) []string {
	args := []string{"--die-with-parent", "--new-session", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"}
	if os.Getuid() == 0 {
		args = append(args, "--cap-drop", "ALL")
	}
	if !network {
		args = append(args, "--unshare-net")
	}
	return args
}

// bwrapArgs builds bwrap's arguments around the server: the whole system
// read-only, a private /tmp and /dev/shm, fresh /dev and /proc, the home
// directory and the user's runtime directory replaced by empty ones, then
// what the server may see (read-only) and write (read-write) bound back
// in. Without network, bwrap installs the socket filter (package
// confine) from descriptor confine.BwrapSeccompFD: the network namespace
// stops TCP, UDP and abstract unix sockets, the filter also unix sockets
// reached by path.
func bwrapArgs(bwrap string, v view, network bool, cmd Command) []string {
	args := append([]string{bwrap}, bwrapBase(network)...)
	if !network {
		args = append(args, "--seccomp", strconv.Itoa(confine.BwrapSeccompFD))
	}
	args = append(args, "--ro-bind", "/", "/", "--dev", "/dev", "--tmpfs", "/dev/shm", "--proc", "/proc", "--tmpfs", "/tmp")
	emptied := []string{"/tmp"}
	if v.home != "" && v.home != "/" && !inside("/tmp", v.home) {
		args = append(args, "--tmpfs", v.home)
		emptied = append(emptied, v.home)
	}
	if run := "/run/user/" + strconv.Itoa(os.Getuid()); isExisting(run) {
		args = append(args, "--tmpfs", run)
		emptied = append(emptied, run)
	}
	// The symbolic links on the way to the paths bound below are gone
	// where the sandbox has an empty directory instead (bwrap would fail
	// to make the paths through them, "Can't mkdir parents"): the paths
	// are bound where the links lead, and the links made again.
	for _, l := range v.links {
		for _, e := range emptied {
			if within(l.path, e) {
				args = append(args, "--symlink", l.target, l.path)
				break
			}
		}
	}
	for _, p := range v.read {
		args = append(args, "--ro-bind-try", p, p)
	}
	for _, p := range v.write {
		args = append(args, "--bind", p, p)
	}
	if cmd.Dir != "" {
		args = append(args, "--chdir", cmd.Dir)
	}
	args = append(args, "--")
	args = append(args, cmd.Path)
	return append(args, cmd.Argv[1:]...)
}

// errNoCommand: a plan needs the server's argv.
var errNoCommand = errors.New("sandbox: no command")

// Package sandbox confines a stdio server: it turns a server's
// transports.Sandbox settings into a Plan (which mechanism, which paths
// readable and writable, which limits), which the exec stage (package
// confine), the short-lived process that becomes the server, applies.
//
// On Linux there are two mechanisms. Landlock rules and resource limits
// are set by the exec stage on itself before it executes the server, so
// the server never runs a single instruction unconfined; bubblewrap
// (bwrap) builds user, mount, PID and network namespaces around it. Auto
// picks bubblewrap where it works, else Landlock. Under either, the
// server holds no capability, also when the supervisor is root, and
// without network a seccomp filter leaves it only unix sockets it cannot
// connect (package confine). On macOS a Seatbelt profile
// (sandbox-exec) is built; elsewhere every mechanism is unavailable.
//
// A sandbox that was asked for and cannot be had is an error
// (ErrUnavailable): the server is never started unconfined instead.
// See docs/sandbox.md for the defaults and what each mechanism does not
// cover.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mcpvisor/mcpvisor/transports"
)

// ErrUnavailable is matched (errors.Is) by every error saying that a
// sandbox was asked for and cannot be had: no mechanism works here, the
// one named is missing or disabled, or applying it failed. The server
// did not run.
var ErrUnavailable = errors.New("sandbox unavailable")

// UnavailableError says why no mechanism could confine a server. It
// matches ErrUnavailable.
type UnavailableError struct {
	// Requested is the mechanism asked for (auto, landlock, bwrap,
	// seatbelt).
	Requested transports.SandboxMechanism
	// Reasons says, per mechanism tried, why it cannot be used.
	Reasons []string
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("sandbox unavailable (mechanism %s): %s; the server was not started",
		e.Requested, strings.Join(e.Reasons, "; "))
}

// Is makes an UnavailableError match ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Options are the host's settings for every sandbox. The zero value is
// usable.
type Options struct {
	// Home is the home directory that confined servers may not read
	// (except the paths they are given). Empty means the current user's
	// home directory in the password database (never $HOME).
	Home string

	// Disable lists mechanisms never to use, for a kernel or a
	// distribution on which one misbehaves: a server that asks for one of
	// them fails with ErrUnavailable, and auto passes it over.
	Disable []transports.SandboxMechanism

	// Bwrap is the bubblewrap binary. Empty means "bwrap" looked up in
	// PATH.
	Bwrap string

	// RuntimeDir is the user's runtime directory ($XDG_RUNTIME_DIR, which
	// a program may pass; the library reads no environment variable).
	// Empty means /run/user/<uid>. When it is a tmpfs of this user's
	// alone (mode 0700), Landlock's private temporary directories are
	// made there: a directory on a tmpfs is made and removed in
	// microseconds, where one in the home directory's ~/.cache can take
	// milliseconds on a busy disk.
	RuntimeDir string

	// ExecStage starts every confined server through the exec stage (a
	// start of the host binary that confines itself, then executes the
	// server). By default (Linux), where util-linux's prlimit is
	// installed (/usr/bin/prlimit or /bin/prlimit), the process helper
	// starts prlimit instead, which sets the limits and executes the
	// server (inside bubblewrap; with Landlock, from a helper thread
	// already confined): the same confinement, 2-3 ms less per start.
	ExecStage bool
}

func (o *Options) disabled(m transports.SandboxMechanism) bool {
	for _, d := range o.Disable {
		if d == m {
			return true
		}
	}
	return false
}

// Command is the server to confine, as the transport resolved it.
type Command struct {
	Path string            // the executable, absolute or relative to Dir
	Argv []string          // argv[0] first
	Dir  string            // the working directory, absolute
	Env  map[string]string // the config's variables (they are not overridden)
}

// Plan is one start of one confined server, made concrete: the exec
// stage applies Limits and (for Landlock) Rules to itself, then executes
// Path with Argv, which is the server or bubblewrap around it.
type Plan struct {
	Mechanism transports.SandboxMechanism `json:"mechanism"`

	// Path and Argv are what the exec stage executes.
	Path string   `json:"path"`
	Argv []string `json:"argv"`

	// Env holds variables set for the server (TMPDIR and friends), as
	// NAME=value, over its environment.
	Env []string `json:"env,omitempty"`

	Limits Limits `json:"limits"`

	// Landlock is the ruleset of the landlock mechanism.
	Landlock *Ruleset `json:"landlock,omitempty"`

	// Direct: the process helper starts Path itself, without the exec
	// stage; Path is util-linux's prlimit, which sets Limits (see
	// confine.Plan.Direct).
	Direct bool `json:"direct,omitempty"`

	// NoNetwork: the server has no network, and the socket filter (see
	// package confine) is installed: with Landlock by whoever applies the
	// ruleset, with bubblewrap by bwrap itself (--seccomp).
	NoNetwork bool `json:"noNetwork,omitempty"`

	// TempDir is the host-side private temporary directory (Landlock),
	// removed by Cleanup, or by the process helper when the supervisor
	// died first.
	TempDir string `json:"tempDir,omitempty"`
}

// Limits are the resource limits set before the server runs. Zero means
// no limit.
type Limits struct {
	// DataBytes caps each process's data segment (RLIMIT_DATA: heap and
	// private writable mappings; unlike the address space, it does not
	// count the reservations of V8 or Go).
	DataBytes uint64 `json:"dataBytes,omitempty"`
	// OpenFiles caps each process's descriptors (RLIMIT_NOFILE).
	OpenFiles uint64 `json:"openFiles,omitempty"`
	// Processes is how many processes (threads count) the server may
	// start: RLIMIT_NPROC, which counts every task of the user, is set to
	// the user's tasks at start plus this many. (Root is not held by
	// RLIMIT_NPROC.)
	Processes uint64 `json:"processes,omitempty"`
}

// Ruleset is what the exec stage gives landlock_create_ruleset and
// landlock_add_rule.
type Ruleset struct {
	HandledFS  uint64 `json:"fs"`
	HandledNet uint64 `json:"net,omitempty"`
	Scoped     uint64 `json:"scoped,omitempty"`
	Rules      []Rule `json:"rules"`
}

// Rule grants Access beneath Path. A missing path is skipped.
type Rule struct {
	Path   string `json:"path"`
	Access uint64 `json:"access"`
}

// Cleanup removes what Prepare made for the plan (its private temporary
// directory). The server and everything it started must be gone.
func (p *Plan) Cleanup() {
	if p != nil && p.TempDir != "" {
		os.RemoveAll(p.TempDir)
	}
}

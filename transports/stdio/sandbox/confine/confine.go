// Package confine is the exec stage of a confined stdio server: a short
// life of the host binary, started by the process helper (package
// reaper) with argv[0] Arg0 and argv[1] ModeExec, that applies a Plan to
// itself (resource limits, Landlock) and then executes the server (or
// bubblewrap around it), so that the server never runs unconfined.
//
// The stage runs from this package's init: the package depends on the
// standard library and golang.org/x/sys only, so it is initialized before
// most of the host's packages, and a confined start pays for little of
// the host's initialization. It never returns: it executes, or exits
// after writing a Report to descriptor 3, its status pipe (which the exec
// closes on success: close-on-exec).
//
// Package sandbox builds Plans; this package only applies them.
package confine

// Arg0 is the argv[0] of the host binary re-executed as one of mcpvisor's
// helpers; argv[1] names the helper mode.
const Arg0 = "mcpvisor-helper"

// ModeExec is the exec stage's mode (argv[1]); argv[2] is the Plan in
// JSON.
const ModeExec = "exec"

// Plan is what the exec stage applies, as sandbox.Prepare made it (the
// JSON form of sandbox.Plan).
type Plan struct {
	Mechanism string   `json:"mechanism"` // "landlock" applies Landlock; others only limits
	Path      string   `json:"path"`      // executed in the stage's place
	Argv      []string `json:"argv"`
	Limits    Limits   `json:"limits"`
	Landlock  *Ruleset `json:"landlock,omitempty"`

	// Direct asks the process helper to start Path itself, without the
	// exec stage: Path is util-linux's prlimit, which sets the limits on
	// itself and executes the rest of Argv (the server, or bubblewrap
	// around a prlimit and the server). A Landlock ruleset is then
	// applied by the helper to a thread of its own that starts Path and
	// lives as long as the server (the server inherits the thread's
	// domain and no_new_privs, and its parent-death signal would fire
	// when that thread ended).
	Direct bool `json:"direct,omitempty"`

	// NoNetwork: the server has no network. With Landlock the socket
	// filter (SocketFilter) is installed beside the ruleset; with
	// bubblewrap, Argv holds "--seccomp <fd>" and whoever executes bwrap
	// hands it the filter in a memory file at that descriptor (the
	// process helper: descriptor 3, as Argv says; the exec stage: its own
	// descriptor, which it writes into Argv).
	NoNetwork bool `json:"noNetwork,omitempty"`

	// TempDir is the server's private temporary directory on the host
	// (Landlock), removed by the process helper when it ends with the
	// server still running (the supervisor died): "" for none.
	TempDir string `json:"tempDir,omitempty"`
}

// BwrapSeccompFD is the descriptor bubblewrap's "--seccomp" names in a
// plan, where the process helper puts the socket filter when it starts
// bwrap itself.
const BwrapSeccompFD = 3

// Limits are resource limits; zero means none (see sandbox.Limits).
type Limits struct {
	DataBytes uint64 `json:"dataBytes,omitempty"`
	OpenFiles uint64 `json:"openFiles,omitempty"`
	Processes uint64 `json:"processes,omitempty"`
}

// Ruleset is a Landlock ruleset: the rights handled (denied unless a rule
// grants them) and the rules.
type Ruleset struct {
	HandledFS  uint64 `json:"fs"`
	HandledNet uint64 `json:"net,omitempty"`
	Scoped     uint64 `json:"scoped,omitempty"`
	Rules      []Rule `json:"rules"`
}

// Rule grants Access beneath Path; a path that does not exist is skipped.
type Rule struct {
	Path   string `json:"path"`
	Access uint64 `json:"access"`
}

// Report is what a failed exec stage writes to its status pipe.
type Report struct {
	// Kind is KindSandbox when the sandbox itself could not be had
	// (Landlock refused, a limit could not be set); empty when the exec
	// failed.
	Kind  string `json:"kind,omitempty"`
	Errno int    `json:"errno,omitempty"`
	Err   string `json:"error"`
}

// KindSandbox marks a Report of a sandbox that could not be applied.
const KindSandbox = "sandbox"

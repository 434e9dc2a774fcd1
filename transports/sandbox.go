package transports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// SandboxMechanism names how a stdio server is confined.
type SandboxMechanism string

// The mechanisms.
const (
	// SandboxAuto picks the strongest mechanism that works here:
	// bubblewrap, else Landlock (Linux); Seatbelt (macOS).
	SandboxAuto SandboxMechanism = "auto"
	// SandboxLandlock: Landlock rules and resource limits applied in the
	// server's process before it runs (Linux 5.13+; network rules 6.7+).
	SandboxLandlock SandboxMechanism = "landlock"
	// SandboxBwrap: bubblewrap (bwrap on PATH): mount, PID and network
	// namespaces, a private /tmp (Linux).
	SandboxBwrap SandboxMechanism = "bwrap"
	// SandboxSeatbelt: a sandbox-exec profile (macOS).
	SandboxSeatbelt SandboxMechanism = "seatbelt"
)

// Sandbox confines a stdio server: what it may read and write, whether it
// may use the network, how much memory, how many processes and open
// files it may have. See docs/sandbox.md.
//
// In JSON it is true (confined with every default), false (not confined)
// or an object of the members below (confined); any other value, and any
// unknown member, is an error. Paths in Write and Read are absolute once
// a config file is loaded: the loader expands ~ and ${VAR} in them and
// makes relative ones relative to the config file's directory.
type Sandbox struct {
	// Enabled confines the server. False (JSON false) runs it unconfined,
	// whatever the other members say.
	Enabled bool `json:"-"`

	// Write lists the paths the server may write to (and read), besides a
	// private temporary directory (its TMPDIR). A missing path is created
	// as a directory when the server starts.
	Write []string `json:"write,omitempty"`

	// Read lists paths inside the home directory the server may read.
	// Outside the home directory everything is readable.
	Read []string `json:"read,omitempty"`

	// Network allows TCP connections and listening sockets. The default,
	// false, allows neither (and, with bubblewrap, no network at all).
	Network bool `json:"network,omitempty"`

	// MemoryMB caps the server's memory (each process's data segment),
	// in MiB. Zero means 2048.
	MemoryMB int `json:"memoryMB,omitempty"`

	// Processes caps how many processes the server may start (zero: 256).
	Processes int `json:"processes,omitempty"`

	// OpenFiles caps each of its processes' open descriptors (zero:
	// 4096).
	OpenFiles int `json:"openFiles,omitempty"`

	// Mechanism is auto (the default), landlock, bwrap or seatbelt.
	Mechanism SandboxMechanism `json:"mechanism,omitempty"`
}

// The defaults of the limits.
const (
	DefaultSandboxMemoryMB  = 2048
	DefaultSandboxProcesses = 256
	DefaultSandboxOpenFiles = 4096
)

// ErrInvalidSandbox is wrapped by the errors of Sandbox's JSON decoding
// and Validate.
var ErrInvalidSandbox = errors.New("invalid sandbox")

// sandboxFields is the JSON form of an enabled Sandbox's members.
type sandboxFields struct {
	Write     []string         `json:"write,omitempty"`
	Read      []string         `json:"read,omitempty"`
	Network   bool             `json:"network,omitempty"`
	MemoryMB  int              `json:"memoryMB,omitempty"`
	Processes int              `json:"processes,omitempty"`
	OpenFiles int              `json:"openFiles,omitempty"`
	Mechanism SandboxMechanism `json:"mechanism,omitempty"`
}

// UnmarshalJSON reads true, false or an object; null leaves s unchanged.
// Unknown members and members of the wrong type are errors.
func (s *Sandbox) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("null")):
		return nil
	case bytes.Equal(data, []byte("true")):
		*s = Sandbox{Enabled: true}
		return nil
	case bytes.Equal(data, []byte("false")):
		*s = Sandbox{}
		return nil
	case len(data) == 0 || data[0] != '{':
		return fmt.Errorf("%w: want true, false or an object, got %s", ErrInvalidSandbox, jsonKindOf(data))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f sandboxFields
	if err := dec.Decode(&f); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("%w: %s: want %s, got %s", ErrInvalidSandbox, te.Field, te.Type, te.Value)
		}
		// "json: unknown field "x"" and syntax errors.
		return fmt.Errorf("%w: %s", ErrInvalidSandbox, strings.TrimPrefix(err.Error(), "json: "))
	}
	*s = Sandbox{Enabled: true, Write: f.Write, Read: f.Read, Network: f.Network, MemoryMB: f.MemoryMB,
		Processes: f.Processes, OpenFiles: f.OpenFiles, Mechanism: f.Mechanism}
	return s.validateValues()
}

// MarshalJSON writes false, true (enabled with every default) or an
// object.
func (s Sandbox) MarshalJSON() ([]byte, error) {
	if !s.Enabled {
		return []byte("false"), nil
	}
	f := sandboxFields{Write: s.Write, Read: s.Read, Network: s.Network, MemoryMB: s.MemoryMB,
		Processes: s.Processes, OpenFiles: s.OpenFiles, Mechanism: s.Mechanism}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	if string(b) == "{}" {
		return []byte("true"), nil
	}
	return b, nil
}

// Validate reports the first problem of an enabled sandbox: an unknown
// mechanism, a negative limit, a relative or empty path.
func (s *Sandbox) Validate() error {
	if s == nil || !s.Enabled {
		return nil
	}
	if err := s.validateValues(); err != nil {
		return err
	}
	for _, list := range []struct {
		name  string
		paths []string
	}{{"write", s.Write}, {"read", s.Read}} {
		for i, p := range list.paths {
			if !filepath.IsAbs(p) {
				return fmt.Errorf("%w: %s[%d]: %q is not an absolute path", ErrInvalidSandbox, list.name, i, p)
			}
		}
	}
	return nil
}

// validateValues checks what does not depend on path expansion.
func (s *Sandbox) validateValues() error {
	switch s.Mechanism {
	case "", SandboxAuto, SandboxLandlock, SandboxBwrap, SandboxSeatbelt:
	default:
		return fmt.Errorf("%w: mechanism %q (want auto, landlock, bwrap or seatbelt)", ErrInvalidSandbox, s.Mechanism)
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"memoryMB", s.MemoryMB}, {"processes", s.Processes}, {"openFiles", s.OpenFiles}} {
		if n.v < 0 {
			return fmt.Errorf("%w: %s must not be negative", ErrInvalidSandbox, n.name)
		}
	}
	for _, list := range []struct {
		name  string
		paths []string
	}{{"write", s.Write}, {"read", s.Read}} {
		for i, p := range list.paths {
			if p == "" {
				return fmt.Errorf("%w: %s[%d] is empty", ErrInvalidSandbox, list.name, i)
			}
		}
	}
	return nil
}

// Limits returns the memory (bytes), process and open-file limits, with
// the defaults for zero members.
func (s *Sandbox) Limits() (memoryBytes uint64, processes, openFiles int) {
	mb, procs, files := s.MemoryMB, s.Processes, s.OpenFiles
	if mb == 0 {
		mb = DefaultSandboxMemoryMB
	}
	if procs == 0 {
		procs = DefaultSandboxProcesses
	}
	if files == 0 {
		files = DefaultSandboxOpenFiles
	}
	return uint64(mb) << 20, procs, files
}

// jsonKindOf names the kind of the JSON value data starts with.
func jsonKindOf(data []byte) string {
	if len(data) == 0 {
		return "nothing"
	}
	switch data[0] {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

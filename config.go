package mcpvisor

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpvisor/mcpvisor/transports"
)

// Config is the set of servers read from one or more config files.
type Config struct {
	// Servers maps a server name to its entry, after ${VAR} expansion and
	// validation. It is never nil.
	Servers map[string]ServerConfig

	// Sources maps each server name to the file whose entry won (the last
	// loaded file that defines it), as named to the loader. It is never nil
	// and has exactly the keys of Servers.
	Sources map[string]string

	// Layers maps each server name to the layer of that file: LayerUser,
	// LayerProject, LayerLocal, LayerManaged, LayerFile, or the Name of a
	// host's ConfigLayer. It is never nil and has exactly the keys of
	// Servers.
	Layers map[string]string

	// Pending maps each server held for the user's approval to what the
	// user is asked to approve. A held server is in Servers too, with
	// NeedsApproval set and nothing else but its Type: its entry is not
	// expanded, so that a project file cannot have the user's secrets
	// sent anywhere before the user saw it, and the supervisor never
	// starts it (StateNeedsApproval). It is never nil; its keys are in
	// Servers.
	Pending map[string]PendingServer

	// Files lists the files whose servers were loaded, in load order
	// (lowest precedence first). Missing layer files that were skipped are
	// not listed, nor is a managed file read only for its policy (its path
	// is the Source of its entry in Policies).
	Files []string

	// Excluded maps each server that a policy removed to the reason, which
	// names the rule (see ServerPolicy.Check). It is never nil, and its
	// keys are in neither Servers nor Sources: an excluded server is never
	// started.
	Excluded map[string]string

	// Policies are the server policies that were applied, in the order
	// they were checked: the managed file's, then LoadOptions.Policy. A
	// server had to pass every one to stay in Servers. Empty means no
	// policy.
	Policies []ServerPolicy

	// untrusted holds the servers whose entry comes from an untrusted
	// layer (nil when there is none).
	untrusted map[string]bool
}

// Check reports whether a server may run under every policy in
// c.Policies, as LoadConfig decided for the servers it loaded: a host
// vets a server it adds at runtime with it. When ok is false, reason is
// the first failing policy's (see ServerPolicy.Check). With no policies
// every server may run.
func (c *Config) Check(name string, sc ServerConfig) (ok bool, reason string) {
	for i := range c.Policies {
		if ok, reason := c.Policies[i].Check(name, sc); !ok {
			return false, reason
		}
	}
	return true, ""
}

// PolicyOptionSource is the Source LoadConfig gives LoadOptions.Policy
// when the caller left it empty: it names that policy in exclusion
// reasons and is the File of the *ConfigError for a problem in it.
const PolicyOptionSource = "LoadOptions.Policy"

// ErrUnsetVariable is wrapped (inside a *ConfigError) when a ${VAR}
// reference without a default names a variable that is not set. The
// message names the variable.
var ErrUnsetVariable = errors.New("environment variable is not set")

// ErrInputVariable is wrapped (inside a *ConfigError) when a value holds a
// VS Code input variable, ${input:id}: mcpvisor has no one to prompt. The
// message names the reference.
var ErrInputVariable = errors.New("VS Code input variables are not supported; set the value in env or the file")

// workspaceFolderVar is the VS Code variable that expands to the project
// directory.
const workspaceFolderVar = "workspaceFolder"

// ConfigError reports a problem in one config file. Every error that
// LoadConfig and LoadConfigFiles return for a file's content or for reading
// it is a *ConfigError (several are combined with errors.Join; errors.As
// finds the first).
type ConfigError struct {
	// File is the file as named to the loader. For a problem in a
	// programmatic ServerPolicy it is the policy's Source
	// (PolicyOptionSource for LoadOptions.Policy), which may be empty; the
	// message then starts with Path.
	File string

	// Path locates the problem inside the file, in JavaScript-like
	// notation: mcpServers.github.args[2], servers["my.server"].env.TOKEN,
	// deniedMcpServers[1].serverUrl. Members whose name is not made of
	// letters, digits, '_' and '-' are written as quoted indexes. Path is
	// empty when the problem concerns the whole file (unreadable, not
	// JSON, no server map).
	Path string

	// Err is the problem.
	Err error
}

func (e *ConfigError) Error() string {
	msg := e.Err.Error()
	if e.Path != "" {
		msg = e.Path + ": " + msg
	}
	if e.File != "" {
		msg = e.File + ": " + msg
	}
	return msg
}

// Unwrap returns Err.
func (e *ConfigError) Unwrap() error { return e.Err }

// LoadOptions select the files LoadConfig reads, how it expands them and
// the policy it applies. The zero value does the standard layered
// discovery with the process environment.
type LoadOptions struct {
	// Files, when not empty, are the only files whose servers are loaded,
	// in order (later files win); each must exist. Home and Dir are then
	// ignored, and so is the managed file's server map, but not its
	// policy: an administrator's allowedMcpServers and deniedMcpServers
	// apply to these files too.
	Files []string

	// Home is the directory holding the user layer (<Home>/.mcp.json).
	// Empty means os.UserHomeDir; if that fails, the user layer is
	// skipped.
	Home string

	// Dir is the project directory holding the project layer
	// (<Dir>/.mcp.json) and the local layer (<Dir>/.mcp.local.json), and
	// the value of ${workspaceFolder} (made absolute). Empty means the
	// working directory.
	Dir string

	// ManagedFile is the managed config file. Empty means
	// DefaultManagedFile.
	ManagedFile string

	// Policy, when not nil, is a server policy applied in addition to the
	// managed file's: a server must pass both (see ServerPolicy.Check).
	// LoadConfig does not modify it. Its Source, if empty, becomes
	// PolicyOptionSource in Config.Policies. A malformed entry fails the
	// load with a *ConfigError whose File is that Source.
	Policy *ServerPolicy

	// Layers, when not empty, are read instead of the standard user,
	// project and local layers, lowest precedence first (ignored when
	// Files is set or the managed file holds a server map). Home is then
	// not used; Dir still names the project (approvals, and
	// ${workspaceFolder}).
	Layers []ConfigLayer

	// Approvals says which entries of untrusted layers (the project and
	// local layers, and host layers not marked Trusted) the user
	// approved; the others are held (Config.Pending). Nil approves
	// nothing: every server of an untrusted layer is held. Files named
	// in Files, the user layer and the managed file are trusted.
	Approvals Approvals

	// LookupEnv resolves ${VAR} references. Nil means os.LookupEnv.
	LookupEnv func(name string) (value string, ok bool)
}

// LoadConfig loads the servers a host should run.
//
// The managed file is read first, if it exists (a managed file that exists
// but cannot be read is an error, never skipped). It is a JSON object
// holding a server map ("mcpServers" or "servers"), a server policy
// ("allowedMcpServers", "deniedMcpServers"; see ServerPolicy), or both; a
// managed file with neither is an error.
//
// Then the servers. With opts.Files set it loads exactly those files.
// Otherwise, if the managed file holds a server map, it loads only that
// map: the managed file is exclusive. If not (no managed file, or one
// holding only a policy), it loads the layers that exist, lowest
// precedence first: user <Home>/.mcp.json, project <Dir>/.mcp.json, local
// <Dir>/.mcp.local.json. A layer that does not exist is skipped; a layer
// that exists but cannot be read is an error. The same file reached twice
// (Home equal to Dir) is loaded once. Finding no file at all is not an
// error: the Config is empty.
//
// The servers of an untrusted layer (project, local, or a host layer not
// marked Trusted) start only once the user approved their entry as
// written, in this project directory (opts.Approvals): the others are
// held — in Servers with NeedsApproval set, unexpanded, and in Pending
// with what to show the user. A disabled entry of an untrusted layer is
// loaded disabled, unexpanded, without approval.
//
// Last, the policies: the managed file's, then opts.Policy. Each server
// that fails one is moved from Servers (and Sources) to Excluded with the
// reason; Config.Policies holds the policies for Config.Check. A held
// server is checked once approved (its entry is expanded only then),
// except against projectServers "deny", which excludes every server of
// an untrusted layer. Policy lists in files other than the managed file
// are ignored like any other unknown top-level member.
//
// Files are read as described at LoadConfigFiles. On error the Config is
// nil and the error holds every problem found, each a *ConfigError (the
// one exception: failing to find the working directory when Dir is empty
// and the layers are loaded).
func LoadConfig(opts LoadOptions) (*Config, error) {
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	lookup = withWorkspace(lookup, opts.Dir)

	var errs []error
	var policies []ServerPolicy

	managed := opts.ManagedFile
	if managed == "" {
		managed = DefaultManagedFile
	}
	var managedTop map[string]json.RawMessage // nil: no managed file
	switch data, err := os.ReadFile(managed); {
	case err == nil:
		top, e := decodeTop(data, true)
		if e != nil {
			e.File = managed
			errs = append(errs, e)
			break
		}
		policy, hasPolicy, policyErrs := parsePolicy(top)
		for _, e := range policyErrs {
			e.File = managed
			errs = append(errs, e)
		}
		_, hasMCP := top["mcpServers"]
		_, hasVS := top["servers"]
		if !hasPolicy && !hasMCP && !hasVS {
			errs = append(errs, &ConfigError{File: managed, Err: errors.New(
				`no "mcpServers", "servers", "allowedMcpServers", "deniedMcpServers" or "projectServers" member`)})
		}
		if hasPolicy {
			policy.Source = managed
			policies = append(policies, policy)
		}
		managedTop = top
	case !errors.Is(err, fs.ErrNotExist):
		// A policy file we cannot see must not be silently ignored.
		errs = append(errs, &ConfigError{File: managed, Err: fileError(err)})
	}

	if opts.Policy != nil {
		policy := *opts.Policy
		if policy.Source == "" {
			policy.Source = PolicyOptionSource
		}
		for _, e := range policy.validate() {
			errs = append(errs, e)
		}
		policies = append(policies, policy)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	var cfg *Config
	_, hasMCP := managedTop["mcpServers"]
	_, hasVS := managedTop["servers"]
	ld := &loader{lookup: lookup, approvals: opts.Approvals, project: projectKey(opts.Dir), home: userHome(opts.Home)}
	switch {
	case len(opts.Files) > 0:
		cfg, errs = ld.load(explicitFiles(opts.Files), false)
	case hasMCP || hasVS:
		cfg = newConfig()
		servers, _, fileErrs := parseServers(managedTop, expanderFor(managed, lookup, ld.home), nil)
		for _, e := range fileErrs {
			e.File = managed
			errs = append(errs, e)
		}
		cfg.addFile(layerFile{LayerManaged, managed, true}, servers, nil)
	case len(opts.Layers) > 0:
		layers := make([]layerFile, len(opts.Layers))
		for i, l := range opts.Layers {
			layers[i] = layerFile{l.Name, l.File, l.Trusted}
		}
		cfg, errs = ld.load(layers, true)
	default:
		home := opts.Home
		if home == "" {
			home, _ = os.UserHomeDir() // no home: no user layer
		}
		dir := opts.Dir
		if dir == "" {
			wd, err := os.Getwd()
			if err != nil {
				return nil, fmt.Errorf("mcpvisor: finding the project directory: %w", err)
			}
			dir = wd
		}
		cfg, errs = ld.load(standardLayers(home, dir), true)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	cfg.Policies = policies
	for _, name := range slices.Sorted(maps.Keys(cfg.Servers)) {
		sc := cfg.Servers[name]
		for i := range policies {
			ok, reason := true, ""
			switch {
			case cfg.untrusted[name] && policies[i].ProjectServers == ProjectServersDeny:
				ok, reason = false, policies[i].reason(`projectServers is "deny": servers of untrusted layers (the project's config files) may not run`)
			case sc.NeedsApproval == "":
				ok, reason = policies[i].check(name, sc)
			}
			if !ok {
				cfg.Excluded[name] = reason
				delete(cfg.Servers, name)
				delete(cfg.Sources, name)
				delete(cfg.Layers, name)
				delete(cfg.Pending, name)
				break
			}
		}
	}
	return cfg, nil
}

// LoadConfigFiles loads the named files in order, expanding references
// from the process environment. Every file must exist. It reads no
// managed file and applies no policy: Config.Excluded is empty.
//
// A file is a JSON object (strict JSON: no comments or trailing commas)
// holding its servers either under "mcpServers" (the .mcp.json format of
// Claude Code, Claude Desktop and Cursor) or under "servers" (VS Code's
// mcp.json), not both; other top-level members are ignored. A server
// defined by several files takes the entry of the last one, whole: entries
// are never merged member by member.
//
// Inside an entry, unknown members are ignored and null means absent, but
// a known member of the wrong JSON type is an error; so is an unknown or
// mistyped member of "sandbox", whose problems must never leave a server
// less confined than asked. Member names are case-sensitive. In command,
// args, env values, cwd, url, header values, the tls members and the
// sandbox's paths (nowhere else, and never in keys) ${VAR} is replaced by
// the variable's value and ${VAR:-default} by the value, or by default
// when the variable is unset or empty. A ${VAR} whose variable is unset is
// an error (ErrUnsetVariable), never an empty string. Only "${" starts a
// reference: a lone "$" and "$$" are literal. Names are letters, digits
// and '_', not starting with a digit; defaults may contain anything but
// "}" and "${". Two VS Code variables are understood: ${workspaceFolder}
// is the project directory, absolute (LoadOptions.Dir, or the working
// directory), whatever the environment says; ${input:id} is an error
// (ErrInputVariable). A sandbox path may also start with ~ (the home
// directory: LoadOptions.Home, else the user's), and a relative one is
// relative to the directory of its file. A top-level "sandbox" member
// (true, false or an object, as in an entry) is the default of the
// file's stdio servers that have no "sandbox" of their own ("sandbox":
// false in an entry opts out). Each entry is then checked with
// ServerConfig.Validate; the empty server name is rejected.
//
// On error the Config is nil and the error holds every problem found (at
// most one per server entry), each a *ConfigError.
func LoadConfigFiles(paths ...string) (*Config, error) {
	ld := &loader{lookup: withWorkspace(os.LookupEnv, ""), home: userHome("")}
	cfg, errs := ld.load(explicitFiles(paths), false)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// withWorkspace makes lookup resolve ${workspaceFolder} to dir, made
// absolute ("" is the working directory). If the directory cannot be
// found, the variable is unset.
func withWorkspace(lookup func(string) (string, bool), dir string) func(string) (string, bool) {
	if dir == "" {
		dir = "."
	}
	abs, err := filepath.Abs(dir)
	return func(name string) (string, bool) {
		if name == workspaceFolderVar {
			return abs, err == nil
		}
		return lookup(name)
	}
}

// newConfig returns an empty Config with its maps made.
func newConfig() *Config {
	return &Config{Servers: map[string]ServerConfig{}, Sources: map[string]string{}, Layers: map[string]string{},
		Pending: map[string]PendingServer{}, Excluded: map[string]string{}}
}

// addFile records that the file of layer l was loaded and defines
// servers, of which pending are held.
func (c *Config) addFile(l layerFile, servers map[string]ServerConfig, pending map[string]PendingServer) {
	c.Files = append(c.Files, l.path)
	for name, sc := range servers {
		sc.Scope = l.layer
		c.Servers[name] = sc
		c.Sources[name] = l.path
		c.Layers[name] = l.layer
		if l.trusted {
			delete(c.untrusted, name)
		} else {
			if c.untrusted == nil {
				c.untrusted = map[string]bool{}
			}
			c.untrusted[name] = true
		}
		if p, held := pending[name]; held {
			c.Pending[name] = p
		} else {
			delete(c.Pending, name) // a later layer's entry wins, whole
		}
	}
}

// explicitFiles are files named to the loader: trusted, LayerFile.
func explicitFiles(paths []string) []layerFile {
	out := make([]layerFile, len(paths))
	for i, p := range paths {
		out[i] = layerFile{LayerFile, p, true}
	}
	return out
}

// loader loads layer files.
type loader struct {
	lookup    func(string) (string, bool)
	approvals Approvals // for the untrusted layers; nil approves nothing
	project   string    // the project directory approvals are for
	home      string    // for ~ in sandbox paths ("" when unknown)
}

// expander expands the members of one file's entries: ${VAR} references
// through lookup; in sandbox paths also a leading ~ (home), and relative
// paths are made relative to dir, the file's directory.
type expander struct {
	lookup func(string) (string, bool)
	dir    string // absolute
	home   string // "" when unknown: a ~ path is then an error
}

// expanderFor returns the expander of the file at path.
func expanderFor(path string, lookup func(string) (string, bool), home string) expander {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		dir = filepath.Dir(path)
	}
	return expander{lookup: lookup, dir: dir, home: home}
}

// userHome is the home directory for ~ in sandbox paths: given, or the
// user's.
func userHome(given string) string {
	if given != "" {
		return given
	}
	home, _ := os.UserHomeDir()
	return home
}

// load loads files in order. With skipMissing, files that do not exist
// are skipped. With errors, the Config is nil.
func (ld *loader) load(files []layerFile, skipMissing bool) (*Config, []error) {
	cfg := newConfig()
	var errs []error
	seen := map[string]bool{}
	for _, l := range files {
		file := l.path
		if skipMissing {
			key, err := filepath.Abs(file)
			if err != nil {
				key = filepath.Clean(file)
			}
			if seen[key] {
				continue
			}
			seen[key] = true
		}
		data, err := os.ReadFile(file)
		if err != nil {
			if skipMissing && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			errs = append(errs, &ConfigError{File: file, Err: fileError(err)})
			continue
		}
		var gate *approvalGate
		if !l.trusted {
			gate = &approvalGate{layer: l.layer, file: file, project: ld.project, approvals: ld.approvals, workspace: ld.workspaceOnly}
		}
		servers, pending, fileErrs := parseFile(data, expanderFor(file, ld.lookup, ld.home), gate)
		for _, e := range fileErrs {
			e.File = file
			errs = append(errs, e)
		}
		cfg.addFile(l, servers, pending)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return cfg, nil
}

// workspaceOnly resolves ${workspaceFolder} and nothing else.
func (ld *loader) workspaceOnly(name string) (string, bool) {
	if name != workspaceFolderVar {
		return "", false
	}
	return ld.lookup(name)
}

// fileError drops the file name from an *fs.PathError, which ConfigError
// already names; errors.Is(err, fs.ErrNotExist) still holds.
func fileError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ServerPolicy is an administrator's rule on which servers may run, as
// the "allowedMcpServers" and "deniedMcpServers" members of the managed
// file (the JSON form of this type) or LoadOptions.Policy.
//
// A server that matches an entry of Denied never runs, whatever Allowed
// says. With Allowed nil every other server runs; otherwise a server must
// match an entry of *Allowed, and an empty list lets no server run. Which
// Allowed entries count depends on the server, because its name is a
// label that whoever writes the config chooses, while its command and URL
// are what actually runs: a stdio server must match a serverCommand entry
// when *Allowed has any, a remote (http, sse, ws) server a serverUrl entry
// when *Allowed has any; otherwise (and for in-process servers, always) a
// serverName entry. Denied entries all count: a name, a command or a URL
// match denies.
//
// Policy entries are matched against the server entry after ${VAR}
// expansion; they are never expanded themselves.
type ServerPolicy struct {
	// Allowed, when not nil, lists the servers allowed to run. Nil (the
	// JSON member absent or null) allows every server that Denied does not
	// deny; a pointer to an empty list (JSON []) allows none. A pointer,
	// rather than a nil-or-empty slice, so that an allow list built empty
	// by a program still allows nothing, and so that the JSON form
	// round-trips.
	Allowed *[]PolicyEntry `json:"allowedMcpServers,omitempty"`

	// Denied lists the servers that never run.
	Denied []PolicyEntry `json:"deniedMcpServers,omitempty"`

	// ProjectServers says what becomes of the servers of untrusted layers
	// (a project's .mcp.json and .mcp.local.json, and host layers not
	// marked trusted): ProjectServersApprove (or empty, the default) lets
	// them run once the user approved their entry; ProjectServersDeny
	// excludes them all, approved or not.
	ProjectServers string `json:"projectServers,omitempty"`

	// Source names the policy in the reasons Check gives and is the File
	// of the errors Validate returns: LoadConfig sets it to the managed
	// file's path, or PolicyOptionSource. Empty names nothing.
	Source string `json:"-"`
}

// The values of ServerPolicy.ProjectServers.
const (
	ProjectServersApprove = "approve"
	ProjectServersDeny    = "deny"
)

// MarshalJSON writes the policy as the managed file holds it. A non-nil
// Allowed is written as an array even when it points to a nil slice, so
// that "allows nothing" survives the round trip.
func (p ServerPolicy) MarshalJSON() ([]byte, error) {
	type plain ServerPolicy // without this method
	q := plain(p)
	if q.Allowed != nil && *q.Allowed == nil {
		q.Allowed = &[]PolicyEntry{}
	}
	return json.Marshal(q)
}

// PolicyEntry is one entry of a ServerPolicy list. Exactly one of its
// members is set.
type PolicyEntry struct {
	// ServerName matches the server's name (its key in the server map) as
	// a path.Match pattern: '*' matches any run of characters but '/', '?'
	// one character, [a-z] a class, '\' escapes.
	ServerName string `json:"serverName,omitempty"`

	// ServerCommand matches a stdio server's command line; see
	// CommandPattern.
	ServerCommand CommandPattern `json:"serverCommand,omitzero"`

	// ServerURL matches a remote server's URL. It is scheme://host[:port]
	// followed by an optional path and query, where '*' matches any run of
	// characters (possibly none) within the part it is in: scheme, host,
	// port, or path and query together; every other character stands for
	// itself. Scheme and host compare case-insensitively, and a trailing
	// '.' of the server's host is ignored. No port means the scheme's
	// default port (80 for http and ws, 443 for https and wss); :* means
	// any port. No path means "/". The server's path is compared decoded
	// (%2F is "/"), with "." and ".." segments resolved; its query is
	// compared as written, and its fragment and user information are
	// ignored. So "https://*.example.com/*" matches
	// https://a.b.example.com/mcp but neither https://example.com/ (the
	// dot is literal), https://a.example.com:8443/ (another port),
	// https://evil.com/.example.com/ nor https://a.example.com@evil.com/
	// (whose host is evil.com).
	ServerURL string `json:"serverUrl,omitempty"`
}

// CommandPattern is the serverCommand of a PolicyEntry. In JSON it is an
// array of strings, which sets Exact, or a string, which sets Glob. The
// zero value is absent.
type CommandPattern struct {
	// Exact, when not nil, is a command followed by its arguments. It
	// matches a stdio server whose command and args are these strings, in
	// this order, and no others. Commands compare as written, not resolved
	// against PATH or cwd.
	Exact []string

	// Glob, when Exact is nil, is matched against the server's command
	// line: its command and arguments joined by single spaces. '*' matches
	// any run of characters, spaces and '/' included, so it crosses
	// argument boundaries ("npx -y @corp/*" matches npx with -y and any
	// arguments after "@corp/"); every other character stands for itself.
	// Use Exact to pin the arguments.
	Glob string
}

// IsZero reports whether the pattern is absent.
func (c CommandPattern) IsZero() bool { return c.Exact == nil && c.Glob == "" }

// MarshalJSON writes Exact as an array, or else Glob as a string.
func (c CommandPattern) MarshalJSON() ([]byte, error) {
	if c.Exact != nil {
		return json.Marshal(c.Exact)
	}
	return json.Marshal(c.Glob)
}

// UnmarshalJSON reads an array of strings into Exact or a string into
// Glob; null leaves the pattern absent.
func (c *CommandPattern) UnmarshalJSON(data []byte) error {
	var p CommandPattern
	switch k := jsonKind(data); k {
	case "null":
	case "string":
		if err := json.Unmarshal(data, &p.Glob); err != nil {
			return err
		}
	case "array":
		if err := json.Unmarshal(data, &p.Exact); err != nil {
			return err
		}
	default:
		return fmt.Errorf("serverCommand: want array or string, got %s", k)
	}
	*c = p
	return nil
}

// String writes the pattern as it is written in JSON.
func (c CommandPattern) String() string {
	b, _ := c.MarshalJSON() // strings always marshal
	return string(b)
}

// String describes the entry as it is written in JSON, without the
// braces: serverUrl "https://*.example.com/*".
func (e PolicyEntry) String() string {
	var parts []string
	if e.ServerName != "" {
		parts = append(parts, "serverName "+strconv.Quote(e.ServerName))
	}
	if !e.ServerCommand.IsZero() {
		parts = append(parts, "serverCommand "+e.ServerCommand.String())
	}
	if e.ServerURL != "" {
		parts = append(parts, "serverUrl "+strconv.Quote(e.ServerURL))
	}
	if len(parts) == 0 {
		return "empty entry"
	}
	return strings.Join(parts, ", ")
}

// Validate reports every malformed entry: one without exactly one member,
// or whose pattern is malformed. Each problem is a *ConfigError with File
// p.Source and Path locating the entry (allowedMcpServers[2]) or its
// member (deniedMcpServers[0].serverUrl); several are joined with
// errors.Join. A nil policy is valid.
func (p *ServerPolicy) Validate() error {
	errs := p.validate()
	if len(errs) == 0 {
		return nil
	}
	joined := make([]error, len(errs))
	for i, e := range errs {
		joined[i] = e
	}
	return errors.Join(joined...)
}

func (p *ServerPolicy) validate() []*ConfigError {
	if p == nil {
		return nil
	}
	var errs []*ConfigError
	list := func(name string, entries []PolicyEntry) {
		for i, e := range entries {
			path := pathIndex(name, i)
			if e := e.validate(path); e != nil {
				e.File = p.Source
				errs = append(errs, e)
			}
		}
	}
	if p.Allowed != nil {
		list("allowedMcpServers", *p.Allowed)
	}
	list("deniedMcpServers", p.Denied)
	if e := validProjectServers(p.ProjectServers); e != nil {
		e.File = p.Source
		errs = append(errs, e)
	}
	return errs
}

// validProjectServers checks a projectServers value.
func validProjectServers(v string) *ConfigError {
	switch v {
	case "", ProjectServersApprove, ProjectServersDeny:
		return nil
	}
	return &ConfigError{Path: "projectServers", Err: fmt.Errorf("%q: want %q or %q", v, ProjectServersApprove, ProjectServersDeny)}
}

// validate checks an entry found at the ConfigError path at.
func (e PolicyEntry) validate(at string) *ConfigError {
	var set []string
	if e.ServerName != "" {
		set = append(set, `"serverName"`)
	}
	if !e.ServerCommand.IsZero() {
		set = append(set, `"serverCommand"`)
	}
	if e.ServerURL != "" {
		set = append(set, `"serverUrl"`)
	}
	switch {
	case len(set) == 0:
		return &ConfigError{Path: at, Err: errEntryNeedsOne}
	case len(set) > 1:
		return &ConfigError{Path: at, Err: fmt.Errorf("entry has %s; an entry has exactly one", strings.Join(set, " and "))}
	}
	switch c := e.ServerCommand; {
	case e.ServerName != "":
		if _, err := path.Match(e.ServerName, ""); err != nil {
			return &ConfigError{Path: pathKey(at, "serverName"), Err: fmt.Errorf("malformed pattern %q: %w", e.ServerName, err)}
		}
	case c.Exact != nil && c.Glob != "":
		return &ConfigError{Path: pathKey(at, "serverCommand"), Err: errors.New("both Exact and Glob are set; set one")}
	case c.Exact != nil:
		if len(c.Exact) == 0 || c.Exact[0] == "" {
			return &ConfigError{Path: pathKey(at, "serverCommand"), Err: errors.New("command must not be empty")}
		}
	case e.ServerURL != "":
		if _, err := parseURLPattern(e.ServerURL); err != nil {
			return &ConfigError{Path: pathKey(at, "serverUrl"), Err: err}
		}
	}
	return nil
}

var errEntryNeedsOne = errors.New(`entry needs one of "serverName", "serverCommand" or "serverUrl"`)

// Check reports whether the server named name, configured as sc, may run
// under the policy (see ServerPolicy for the rules). A nil policy allows
// every server. When ok is false, reason names the rule, prefixed by
// Source and ": " when Source is set: the denying entry, as in
// `deniedMcpServers[1] (serverUrl "https://*.evil.com/*")`, or why no
// allowed entry admits the server. A malformed policy (see Validate)
// allows nothing. Reasons never quote the server's command line or URL,
// which may hold secrets after expansion; they are empty when ok is true.
//
// Check pins what starts or where it connects, not how: a command match
// says nothing of the server's env or cwd, a URL match nothing of its
// headers.
func (p *ServerPolicy) Check(name string, sc ServerConfig) (ok bool, reason string) {
	if p == nil {
		return true, ""
	}
	if errs := p.validate(); len(errs) > 0 {
		e := *errs[0]
		e.File = ""
		return false, p.reason("malformed policy: " + e.Error())
	}
	return p.check(name, sc)
}

// check is Check on a policy already validated.
func (p *ServerPolicy) check(name string, sc ServerConfig) (ok bool, reason string) {
	id := identify(name, sc)
	for i, e := range p.Denied {
		if e.matches(id) {
			return false, p.reason(fmt.Sprintf("deniedMcpServers[%d] (%s)", i, e))
		}
	}
	if p.Allowed == nil {
		return true, ""
	}
	allowed := *p.Allowed
	if len(allowed) == 0 {
		return false, p.reason("allowedMcpServers is empty: no server may run")
	}
	// The member that identifies this server in the allow list.
	var key string
	switch {
	case id.command != nil && slices.ContainsFunc(allowed, func(e PolicyEntry) bool { return !e.ServerCommand.IsZero() }):
		key = "serverCommand"
	case id.remote && slices.ContainsFunc(allowed, func(e PolicyEntry) bool { return e.ServerURL != "" }):
		key = "serverUrl"
	default:
		key = "serverName"
	}
	for _, e := range allowed {
		if e.key() == key && e.matches(id) {
			return true, ""
		}
	}
	switch key {
	case "serverCommand":
		return false, p.reason("no allowedMcpServers serverCommand entry matches its command line (a stdio server must match one when the list has any)")
	case "serverUrl":
		return false, p.reason("no allowedMcpServers serverUrl entry matches its url (a remote server must match one when the list has any)")
	}
	return false, p.reason("no allowedMcpServers serverName entry matches its name")
}

func (p *ServerPolicy) reason(r string) string {
	if p.Source == "" {
		return r
	}
	return p.Source + ": " + r
}

// key names the member an entry sets ("" for a malformed entry).
func (e PolicyEntry) key() string {
	switch {
	case e.ServerName != "":
		return "serverName"
	case !e.ServerCommand.IsZero():
		return "serverCommand"
	case e.ServerURL != "":
		return "serverUrl"
	}
	return ""
}

// serverIdentity is what policy entries match a server on.
type serverIdentity struct {
	name    string
	command []string // a stdio server's command and args; nil otherwise
	remote  bool     // an http, sse or ws server
	url     *url.URL // a remote server's parsed URL; nil if it does not parse
}

func identify(name string, sc ServerConfig) serverIdentity {
	id := serverIdentity{name: name}
	switch sc.Kind() {
	case transports.TypeStdio:
		id.command = append([]string{sc.Command}, sc.Args...)
	case transports.TypeHTTP, transports.TypeSSE, transports.TypeWS:
		id.remote = true
		if u, err := url.Parse(sc.URL); err == nil && u.Scheme != "" && u.Host != "" {
			id.url = u
		}
	}
	return id
}

// matches reports whether a valid entry matches the server. A serverUrl
// entry matches no remote server whose URL does not parse, and a
// serverCommand or serverUrl entry nothing of the other kind or
// in-process.
func (e PolicyEntry) matches(id serverIdentity) bool {
	switch e.key() {
	case "serverName":
		ok, _ := path.Match(e.ServerName, id.name)
		return ok
	case "serverCommand":
		switch {
		case id.command == nil:
			return false
		case e.ServerCommand.Exact != nil:
			return slices.Equal(e.ServerCommand.Exact, id.command)
		}
		return wildcardMatch(e.ServerCommand.Glob, strings.Join(id.command, " "))
	case "serverUrl":
		if id.url == nil {
			return false
		}
		pat, err := parseURLPattern(e.ServerURL)
		return err == nil && pat.matches(id.url)
	}
	return false
}

// urlPattern is a parsed serverUrl entry.
type urlPattern struct {
	scheme, host string // lower case; host without IPv6 brackets
	port         string // "" means the scheme's default port
	rest         string // path and query
}

func parseURLPattern(s string) (urlPattern, error) {
	const example = ` (want scheme://host[:port][/path], e.g. "https://*.example.com/*")`
	scheme, after, ok := strings.Cut(s, "://")
	if !ok || scheme == "" {
		return urlPattern{}, fmt.Errorf("malformed URL pattern %q: no scheme%s", s, example)
	}
	for _, c := range []byte(scheme) {
		if !(c == '*' || c == '+' || c == '-' || c == '.' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return urlPattern{}, fmt.Errorf("malformed URL pattern %q: bad scheme%s", s, example)
		}
	}
	if strings.Contains(after, "#") {
		return urlPattern{}, fmt.Errorf("malformed URL pattern %q: a fragment is never sent, so it cannot be matched", s)
	}
	authority, rest := after, ""
	if i := strings.IndexAny(after, "/?"); i >= 0 {
		authority, rest = after[:i], after[i:]
	}
	if strings.Contains(authority, "@") {
		return urlPattern{}, fmt.Errorf("malformed URL pattern %q: user information is not matched; leave it out", s)
	}
	host, port := authority, ""
	hasPort := false
	if strings.HasPrefix(authority, "[") {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return urlPattern{}, fmt.Errorf("malformed URL pattern %q: unclosed '[' in the host", s)
		}
		host, port = authority[1:end], authority[end+1:]
		if port != "" {
			if port[0] != ':' {
				return urlPattern{}, fmt.Errorf("malformed URL pattern %q: bad port%s", s, example)
			}
			port, hasPort = port[1:], true
		}
	} else if i := strings.LastIndexByte(authority, ':'); i >= 0 {
		host, port, hasPort = authority[:i], authority[i+1:], true
	}
	if host == "" {
		return urlPattern{}, fmt.Errorf("malformed URL pattern %q: no host%s", s, example)
	}
	if hasPort && (port == "" || strings.Trim(port, "0123456789*") != "") {
		return urlPattern{}, fmt.Errorf("malformed URL pattern %q: a port is digits or '*'", s)
	}
	switch {
	case rest == "":
		rest = "/"
	case rest[0] == '?':
		rest = "/" + rest
	}
	return urlPattern{scheme: strings.ToLower(scheme), host: strings.ToLower(host), port: port, rest: rest}, nil
}

// matches reports whether the pattern matches u, which has a scheme and a
// host.
func (p urlPattern) matches(u *url.URL) bool {
	scheme := strings.ToLower(u.Scheme)
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	def := defaultPort[scheme]
	port := u.Port()
	if port == "" {
		port = def
	}
	if p.port == "" {
		if port != def {
			return false
		}
	} else if !wildcardMatch(p.port, port) {
		return false
	}
	rest := u.Path
	if rest == "" {
		rest = "/"
	}
	clean := path.Clean(rest)
	if strings.HasSuffix(rest, "/") && clean != "/" {
		clean += "/"
	}
	if u.RawQuery != "" || u.ForceQuery {
		clean += "?" + u.RawQuery
	}
	return wildcardMatch(p.scheme, scheme) && wildcardMatch(p.host, host) && wildcardMatch(p.rest, clean)
}

var defaultPort = map[string]string{"http": "80", "ws": "80", "https": "443", "wss": "443"}

// wildcardMatch reports whether s matches pattern, in which '*' matches
// any run of bytes (possibly none) and every other byte itself.
func wildcardMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0 // the last '*' seen, and where in s it started matching
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0: // let the last '*' take one more byte
			mark++
			p, i = star+1, mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// parsePolicy decodes the policy members of a managed file's top-level
// object. has reports whether either list is present (not null). Errors
// lack File; there is at most one per entry.
func parsePolicy(top map[string]json.RawMessage) (policy ServerPolicy, has bool, errs []*ConfigError) {
	list := func(name string) (entries []PolicyEntry, present bool) {
		raw, ok := top[name]
		if !ok || jsonKind(raw) == "null" {
			return nil, false
		}
		if k := jsonKind(raw); k != "array" {
			errs = append(errs, typeError(name, "array", k))
			return nil, true
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			errs = append(errs, &ConfigError{Path: name, Err: err})
			return nil, true
		}
		entries = make([]PolicyEntry, 0, len(elems))
		for i, elem := range elems {
			path := pathIndex(name, i)
			e, ce := decodePolicyEntry(elem, path)
			if ce == nil {
				ce = e.validate(path)
			}
			if ce != nil {
				errs = append(errs, ce)
				continue
			}
			entries = append(entries, e)
		}
		return entries, true
	}
	allowed, hasAllowed := list("allowedMcpServers")
	denied, hasDenied := list("deniedMcpServers")
	if hasAllowed {
		policy.Allowed = &allowed
	}
	policy.Denied = denied
	hasProject := false
	if raw, ok := top["projectServers"]; ok && jsonKind(raw) != "null" {
		hasProject = true
		if k := jsonKind(raw); k != "string" {
			errs = append(errs, typeError("projectServers", "string", k))
		} else if err := json.Unmarshal(raw, &policy.ProjectServers); err != nil {
			errs = append(errs, &ConfigError{Path: "projectServers", Err: err})
		} else if e := validProjectServers(policy.ProjectServers); e != nil {
			errs = append(errs, e)
		}
	}
	return policy, hasAllowed || hasDenied || hasProject, errs
}

// decodePolicyEntry decodes one list element. Unlike a server entry, a
// policy entry may hold no unknown member: a misspelt key must not quietly
// widen what the entry allows or narrow what it denies.
func decodePolicyEntry(raw json.RawMessage, path string) (PolicyEntry, *ConfigError) {
	var e PolicyEntry
	if k := jsonKind(raw); k != "object" {
		return e, typeError(path, "object", k)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return e, &ConfigError{Path: path, Err: err}
	}
	present := 0
	var both []string
	for _, k := range slices.Sorted(maps.Keys(members)) {
		v := members[k]
		p := pathKey(path, k)
		kind := jsonKind(v)
		if kind == "null" {
			continue // absent
		}
		switch k {
		case "serverName", "serverUrl":
			if kind != "string" {
				return e, typeError(p, "string", kind)
			}
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return e, &ConfigError{Path: p, Err: err}
			}
			if s == "" {
				return e, &ConfigError{Path: p, Err: errors.New("must not be empty")}
			}
			if k == "serverName" {
				e.ServerName = s
			} else {
				e.ServerURL = s
			}
		case "serverCommand":
			switch kind {
			case "string":
				if err := json.Unmarshal(v, &e.ServerCommand.Glob); err != nil {
					return e, &ConfigError{Path: p, Err: err}
				}
				if e.ServerCommand.Glob == "" {
					return e, &ConfigError{Path: p, Err: errors.New("must not be empty")}
				}
			case "array":
				if ce := decodeValue(reflect.ValueOf(&e.ServerCommand.Exact).Elem(), v, p); ce != nil {
					return e, ce
				}
			default:
				return e, typeError(p, "array or string", kind)
			}
		default:
			return e, &ConfigError{Path: p, Err: fmt.Errorf(`unknown member %q: an entry has one of "serverName", "serverCommand" or "serverUrl"`, k)}
		}
		present++
		both = append(both, strconv.Quote(k))
	}
	if present > 1 {
		return e, &ConfigError{Path: path, Err: fmt.Errorf("entry has %s; an entry has exactly one", strings.Join(both, " and "))}
	}
	return e, nil
}

// parseFile decodes, expands and validates one file's servers; with a
// gate (an untrusted layer), the entries it does not approve are held
// instead, unexpanded. The errors it returns lack File.
func parseFile(data []byte, x expander, gate *approvalGate) (map[string]ServerConfig, map[string]PendingServer, []*ConfigError) {
	top, e := decodeTop(data, false)
	if e != nil {
		return nil, nil, []*ConfigError{e}
	}
	return parseServers(top, x, gate)
}

// decodeTop decodes a file's top-level object. The error lacks File.
func decodeTop(data []byte, managed bool) (map[string]json.RawMessage, *ConfigError) {
	want := `want a JSON object with "mcpServers" or "servers"`
	if managed {
		want = `want a JSON object with "mcpServers", "servers", "allowedMcpServers", "deniedMcpServers" or "projectServers"`
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			line, col := lineCol(data, syn.Offset-1) // Offset counts the bad byte
			return nil, &ConfigError{Err: fmt.Errorf("invalid JSON at line %d, column %d: %w", line, col, err)}
		}
		return nil, &ConfigError{Err: fmt.Errorf("%s, got %s", want, jsonKind(data))}
	}
	if top == nil { // the file is "null"
		return nil, &ConfigError{Err: fmt.Errorf("%s, got null", want)}
	}
	return top, nil
}

// parseServers decodes, expands and validates the server map of a file's
// top-level object, expanding through x (relative envFile and sandbox
// paths are resolved against x.dir, the file's directory). With a gate,
// an entry it does not approve is held: it is validated unexpanded and
// returned as heldConfig, and pending says what to approve; a disabled
// entry is returned disabled, unexpanded. The errors it returns lack File.
func parseServers(top map[string]json.RawMessage, x expander, gate *approvalGate) (servers map[string]ServerConfig, pending map[string]PendingServer, errs []*ConfigError) {
	mcpServers, hasMCP := top["mcpServers"]
	vsServers, hasVS := top["servers"]
	var root string
	var rawServers json.RawMessage
	switch {
	case hasMCP && hasVS:
		return nil, nil, []*ConfigError{{Err: errors.New(`has both "mcpServers" and "servers"; use one`)}}
	case hasMCP:
		root, rawServers = "mcpServers", mcpServers
	case hasVS:
		root, rawServers = "servers", vsServers
	default:
		return nil, nil, []*ConfigError{{Err: errors.New(`no "mcpServers" or "servers" member`)}}
	}

	// The file's default sandbox, for its stdio servers that set none.
	var defaultSandbox *transports.Sandbox
	if raw, ok := top["sandbox"]; ok && jsonKind(raw) != "null" {
		var sb transports.Sandbox
		if err := json.Unmarshal(raw, &sb); err != nil {
			return nil, nil, []*ConfigError{{Path: "sandbox", Err: err}}
		}
		if e := x.sandbox(&sb, "sandbox"); e != nil {
			return nil, nil, []*ConfigError{e}
		}
		if err := sb.Validate(); err != nil {
			return nil, nil, []*ConfigError{{Path: "sandbox", Err: err}}
		}
		defaultSandbox = &sb
	}

	var entries map[string]json.RawMessage
	if k := jsonKind(rawServers); k != "object" {
		return nil, nil, []*ConfigError{{Path: root, Err: fmt.Errorf("want object, got %s", k)}}
	}
	if err := json.Unmarshal(rawServers, &entries); err != nil {
		return nil, nil, []*ConfigError{{Path: root, Err: err}}
	}

	servers = make(map[string]ServerConfig, len(entries))
	pending = map[string]PendingServer{}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		path := pathKey(root, name)
		if name == "" {
			errs = append(errs, &ConfigError{Path: path, Err: errors.New("server name must not be empty")})
			continue
		}
		var sc ServerConfig
		if e := decodeValue(reflect.ValueOf(&sc).Elem(), entries[name], path); e != nil {
			errs = append(errs, e)
			continue
		}
		if gate != nil {
			if sc.Disabled { // never started: nothing to approve
				servers[name] = ServerConfig{Config: transports.Config{Type: sc.Kind()}, Disabled: true}
				continue
			}
			approved, p := gate.decide(name, entries[name], &sc)
			if !approved {
				if err := sc.Validate(); err != nil {
					errs = append(errs, &ConfigError{Path: path, Err: err})
					continue
				}
				servers[name] = heldConfig(&sc, p.Reason)
				pending[name] = *p
				continue
			}
		}
		if e := expandServer(&sc, path, x); e != nil {
			errs = append(errs, e)
			continue
		}
		if sc.Sandbox == nil && defaultSandbox != nil && sc.Kind() == transports.TypeStdio {
			sb := *defaultSandbox
			sb.Write, sb.Read = slices.Clone(sb.Write), slices.Clone(sb.Read)
			sc.Sandbox = &sb
		}
		if err := sc.Validate(); err != nil {
			errs = append(errs, &ConfigError{Path: path, Err: err})
			continue
		}
		if err := mergeEnvFile(&sc, x.dir); err != nil {
			errs = append(errs, &ConfigError{Path: pathKey(path, "envFile"), Err: err})
			continue
		}
		servers[name] = sc
	}
	return servers, pending, errs
}

// expandServer expands references in the members that allow them.
func expandServer(sc *ServerConfig, path string, x expander) *ConfigError {
	if sc.Sandbox != nil {
		if e := x.sandbox(sc.Sandbox, pathKey(path, "sandbox")); e != nil {
			return e
		}
	}
	return walkExpandable(sc, path, func(s *string, p string) *ConfigError {
		v, err := expand(*s, x.lookup)
		if err != nil {
			return &ConfigError{Path: p, Err: err}
		}
		*s = v
		return nil
	})
}

// walkExpandable calls one on every member of sc that ${VAR} references
// may appear in (command, args, env values, cwd, envFile, url, the tls
// members, header values), with its path, and stops at the first error.
func walkExpandable(sc *ServerConfig, path string, one func(s *string, path string) *ConfigError) *ConfigError {
	mapValues := func(m map[string]string, p string) *ConfigError {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			v := m[k]
			if e := one(&v, pathKey(p, k)); e != nil {
				return e
			}
			m[k] = v
		}
		return nil
	}
	if e := one(&sc.Command, pathKey(path, "command")); e != nil {
		return e
	}
	for i := range sc.Args {
		if e := one(&sc.Args[i], pathIndex(pathKey(path, "args"), i)); e != nil {
			return e
		}
	}
	if e := mapValues(sc.Env, pathKey(path, "env")); e != nil {
		return e
	}
	if e := one(&sc.Cwd, pathKey(path, "cwd")); e != nil {
		return e
	}
	if e := one(&sc.EnvFile, pathKey(path, "envFile")); e != nil {
		return e
	}
	if e := one(&sc.URL, pathKey(path, "url")); e != nil {
		return e
	}
	if tls := sc.TLS; tls != nil {
		tlsPath := pathKey(path, "tls")
		for _, f := range []struct {
			s    *string
			name string
		}{{&tls.CAFile, "caFile"}, {&tls.CertFile, "certFile"}, {&tls.KeyFile, "keyFile"}, {&tls.ServerName, "serverName"}} {
			if e := one(f.s, pathKey(tlsPath, f.name)); e != nil {
				return e
			}
		}
	}
	return mapValues(sc.Headers, pathKey(path, "headers"))
}

// sandbox expands the paths of a sandbox found at path: ${VAR}
// references, a leading ~ (the home directory), and relative paths, made
// relative to the file's directory.
func (x expander) sandbox(sb *transports.Sandbox, path string) *ConfigError {
	for _, list := range []struct {
		name  string
		paths []string
	}{{"write", sb.Write}, {"read", sb.Read}} {
		for i, p := range list.paths {
			at := pathIndex(pathKey(path, list.name), i)
			v, err := expand(p, x.lookup)
			if err != nil {
				return &ConfigError{Path: at, Err: err}
			}
			switch {
			case v == "~" || strings.HasPrefix(v, "~/"):
				if x.home == "" {
					return &ConfigError{Path: at, Err: errors.New("~ names the home directory, which is unknown")}
				}
				v = filepath.Join(x.home, v[1:])
			case v != "" && !filepath.IsAbs(v):
				v = filepath.Join(x.dir, v)
			}
			if v != "" {
				v = filepath.Clean(v)
			}
			list.paths[i] = v
		}
	}
	return nil
}

// expand replaces ${VAR} and ${VAR:-default} references in s. Errors name
// the reference but never quote the rest of s, which may hold a secret.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		s = s[i+2:]
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return "", errors.New(`unterminated "${" (no closing "}")`)
		}
		ref := s[:end]
		s = s[end+1:]
		name, def, hasDef := strings.Cut(ref, ":-")
		switch {
		case name == "":
			return "", fmt.Errorf(`empty variable name in "${%s}"`, ref)
		case !isVarName(name):
			if n, rest, ok := strings.Cut(name, ":"); ok && isVarName(n) {
				switch {
				case n == "input":
					return "", fmt.Errorf("${%s}: %w", name, ErrInputVariable)
				case n == "env" && isVarName(rest):
					return "", fmt.Errorf(`unsupported reference "${%s}": write ${%s}`, name, rest)
				}
				return "", fmt.Errorf(`unsupported reference "${%s}": only ${VAR} and ${VAR:-default} are supported`, name)
			}
			return "", fmt.Errorf(`malformed reference "${%s}": a name is letters, digits and '_', not starting with a digit; only ${VAR} and ${VAR:-default} are supported`, name)
		case strings.Contains(def, "${"):
			return "", fmt.Errorf(`nested reference in the default of ${%s}: not supported`, name)
		}
		v, ok := lookup(name)
		switch {
		case hasDef && v == "":
			v = def
		case !ok:
			return "", fmt.Errorf("${%s}: %w", name, ErrUnsetVariable)
		}
		b.WriteString(v)
	}
}

func isVarName(s string) bool {
	if s == "" || ('0' <= s[0] && s[0] <= '9') {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// pathKey appends member key to a ConfigError path.
func pathKey(path, key string) string {
	plain := key != ""
	for _, c := range []byte(key) {
		if !(c == '_' || c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			plain = false
			break
		}
	}
	switch {
	case !plain:
		return path + "[" + strconv.Quote(key) + "]"
	case path == "":
		return key
	}
	return path + "." + key
}

// pathIndex appends array index i to a ConfigError path.
func pathIndex(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// decodeValue decodes the JSON value raw into v, which must be settable.
// It does what encoding/json does for the types a ServerConfig is made of,
// but reports the path of a member of the wrong type (encoding/json names
// the struct field, not the array index or map key), ignores unknown
// members, matches member names case-sensitively, and rejects null array
// elements and map values. Walking the type by reflection keeps the
// decoder in step with ServerConfig as members are added. Types with their
// own JSON or text decoding (json.RawMessage) are handed to encoding/json.
func decodeValue(v reflect.Value, raw json.RawMessage, path string) *ConfigError {
	t := v.Type()
	pt := reflect.PointerTo(t)
	if pt.Implements(jsonUnmarshalerType) || pt.Implements(textUnmarshalerType) ||
		t.Kind() == reflect.Interface || (t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8) ||
		(t.Kind() == reflect.Map && t.Key().Kind() != reflect.String) {
		if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
			return &ConfigError{Path: path, Err: err}
		}
		return nil
	}

	kind := jsonKind(raw)
	switch t.Kind() {
	case reflect.Pointer:
		if kind == "null" {
			v.SetZero()
			return nil
		}
		p := reflect.New(t.Elem())
		if e := decodeValue(p.Elem(), raw, path); e != nil {
			return e
		}
		v.Set(p)
		return nil

	case reflect.Struct:
		if kind != "object" {
			return typeError(path, "object", kind)
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(raw, &members); err != nil {
			return &ConfigError{Path: path, Err: err}
		}
		for _, f := range structMembers(t) {
			m, ok := members[f.name]
			if !ok || jsonKind(m) == "null" {
				continue // absent
			}
			if e := decodeValue(v.FieldByIndex(f.index), m, pathKey(path, f.name)); e != nil {
				return e
			}
		}
		return nil

	case reflect.Slice:
		if kind != "array" {
			return typeError(path, "array", kind)
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return &ConfigError{Path: path, Err: err}
		}
		s := reflect.MakeSlice(t, len(elems), len(elems))
		for i, e := range elems {
			if err := decodeValue(s.Index(i), e, pathIndex(path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil

	case reflect.Map:
		if kind != "object" {
			return typeError(path, "object", kind)
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(raw, &members); err != nil {
			return &ConfigError{Path: path, Err: err}
		}
		m := reflect.MakeMapWithSize(t, len(members))
		for _, k := range slices.Sorted(maps.Keys(members)) {
			e := reflect.New(t.Elem()).Elem()
			if err := decodeValue(e, members[k], pathKey(path, k)); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), e)
		}
		v.Set(m)
		return nil
	}

	want := "number"
	switch t.Kind() {
	case reflect.String:
		want = "string"
	case reflect.Bool:
		want = "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		want = "integer"
	}
	if kind != want && (want != "integer" || kind != "number") {
		return typeError(path, want, kind)
	}
	if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
		if want == "integer" {
			// A fraction, or out of range: say so without the Go type.
			return &ConfigError{Path: path, Err: fmt.Errorf("want integer, got %s", raw)}
		}
		return &ConfigError{Path: path, Err: err}
	}
	return nil
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func typeError(path, want, got string) *ConfigError {
	return &ConfigError{Path: path, Err: fmt.Errorf("want %s, got %s", want, got)}
}

// member is one JSON member of a struct: its name and the field's index.
type member struct {
	name  string
	index []int
}

// structMembers lists the JSON members of struct type t the way
// encoding/json names them, flattening untagged embedded structs. When an
// embedded struct's member has the name of a shallower one, the shallower
// wins.
func structMembers(t reflect.Type) []member {
	all := allMembers(t)
	out := all[:0]
	depth := map[string]int{}
	for _, m := range all {
		if d, ok := depth[m.name]; !ok || len(m.index) < d {
			depth[m.name] = len(m.index)
		}
	}
	for _, m := range all {
		if len(m.index) == depth[m.name] {
			out = append(out, m)
		}
	}
	return out
}

func allMembers(t reflect.Type) []member {
	var out []member
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for _, m := range allMembers(f.Type) {
				out = append(out, member{name: m.name, index: append([]int{i}, m.index...)})
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, member{name: name, index: []int{i}})
	}
	return out
}

// jsonKind names the kind of the JSON value raw starts with.
func jsonKind(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
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

// lineCol converts a byte offset in data to a 1-based line and column.
func lineCol(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = 1 + len(before) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, col
}

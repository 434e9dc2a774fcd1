package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/mcpvisor/mcpvisor"
)

// Config is the set of servers read from one or more config files.
type Config struct {
	// Servers maps a server name to its entry, after ${VAR} expansion and
	// validation. It is never nil.
	Servers map[string]mcpvisor.ServerConfig

	// Sources maps each server name to the file whose entry won (the last
	// loaded file that defines it), as named to the loader. It is never nil
	// and has exactly the keys of Servers.
	Sources map[string]string

	// Layers maps each server name to the layer of that file: LayerUser,
	// LayerProject, LayerLocal, LayerManaged, LayerFile, or the Name of a
	// host's Layer. It is never nil and has exactly the keys of
	// Servers.
	Layers map[string]string

	// Pending maps each server held for the user's approval to what the
	// user is asked to approve. A held server is in Servers too, with
	// NeedsApproval set and nothing else but its Type: its entry is not
	// expanded, so that a project file cannot have the user's secrets
	// sent anywhere before the user saw it, and the supervisor never
	// starts it (mcpvisor.StateNeedsApproval). It is never nil; its keys are in
	// Servers.
	Pending map[string]PendingServer

	// Files lists the files whose servers were loaded, in load order
	// (lowest precedence first). Missing layer files that were skipped are
	// not listed, nor is a managed file read only for its policy (its path
	// is the Source of its entry in Policies).
	Files []string

	// Excluded maps each server that a policy removed to the reason, which
	// names the rule (see Policy.Check). It is never nil, and its
	// keys are in neither Servers nor Sources: an excluded server is never
	// started.
	Excluded map[string]string

	// Policies are the server policies that were applied, in the order
	// they were checked: the managed file's, then Options.Policy. A
	// server had to pass every one to stay in Servers. Empty means no
	// policy.
	Policies []Policy

	// Skipped lists the layer files that exist but do not load (cannot
	// be read, are not JSON, or hold an entry the loader rejects), in
	// load order. A skipped file contributes no server, not even its good
	// entries; the other layers load as if it were missing. Only the
	// standard layers and a host's Options.Layers are skipped: a file
	// named in Options.Files, and the managed file, fail the load
	// instead. A host shows these to the user (the CLI warns on stderr).
	Skipped []SkippedLayer

	// Permissions are the permission rules of the files loaded (the
	// top-level "permissions" member), in load order: every rule of a
	// trusted layer, the ask and deny rules of an untrusted one (its
	// allow rules are dropped), and the managed file's. A host passes
	// them as mcpvisor.Options.Permissions (or Supervisor.SetPermissions on a reload).
	Permissions mcpvisor.PermissionRules

	// Lowered maps each server whose entry, from an untrusted layer, asked
	// for more trust than the trusted layers give it to what was lowered
	// (its trust level, its sandbox kept): a project cannot make a server
	// more trusted than the user's config makes it, nor turn off its
	// sandbox. Nil when nothing was.
	Lowered map[string]string

	// untrusted holds the servers whose entry comes from an untrusted
	// layer (nil when there is none).
	untrusted map[string]bool
	// trustedEntries holds the latest entry of each server from a trusted
	// layer: the ceiling of an untrusted layer's entry (lowerUntrusted).
	trustedEntries map[string]mcpvisor.ServerConfig
	// approvedEntries holds, for each server whose winning entry is of an
	// untrusted layer and approved as written, what to hold it with
	// should its launch not be approved (checkLaunches).
	approvedEntries map[string]PendingServer
	// loadedWith is the options c was loaded with (Load), for
	// Approval; nil for LoadFiles.
	loadedWith *Options
}

// Check reports whether a server may run under every policy in
// c.Policies, as Load decided for the servers it loaded: a host
// vets a server it adds at runtime with it. When ok is false, reason is
// the first failing policy's (see Policy.Check). With no policies
// every server may run.
func (c *Config) Check(name string, sc mcpvisor.ServerConfig) (ok bool, reason string) {
	for i := range c.Policies {
		if ok, reason := c.Policies[i].Check(name, sc); !ok {
			return false, reason
		}
	}
	return true, ""
}

// Error reports a problem in one config file. Every error that
// Load and LoadFiles return for a file's content or for reading
// it is a *Error (several are combined with errors.Join; errors.As
// finds the first).
type Error struct {
	// File is the file as named to the loader. For a problem in a
	// programmatic Policy it is the policy's Source
	// (PolicyOptionSource for Options.Policy), which may be empty; the
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

func (e *Error) Error() string {
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
func (e *Error) Unwrap() error { return e.Err }

// Options select the files Load reads, how it expands them and
// the policy it applies. The zero value does the standard layered
// discovery with the process environment.
type Options struct {
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
	// managed file's: a server must pass both (see Policy.Check).
	// Load does not modify it. Its Source, if empty, becomes
	// PolicyOptionSource in Config.Policies. A malformed entry fails the
	// load with a *Error whose File is that Source.
	Policy *Policy

	// Layers, when not empty, are read instead of the standard user,
	// project and local layers, lowest precedence first (ignored when
	// Files is set or the managed file holds a server map). Home is then
	// not used; Dir still names the project (approvals, and
	// ${workspaceFolder}).
	Layers []Layer

	// Approvals says which entries of untrusted layers (the project and
	// local layers, and host layers not marked Trusted) the user
	// approved, as written and, when it implements LaunchApprovals (as
	// *trust.Store does), as launched; the others are held
	// (Config.Pending). Nil approves
	// nothing: every server of an untrusted layer is held. Files named
	// in Files, the user layer and the managed file are trusted.
	Approvals Approvals

	// LookupEnv resolves ${VAR} references. Nil means os.LookupEnv.
	LookupEnv func(name string) (value string, ok bool)
}

// Load loads the servers a host should run.
//
// The managed file is read first, if it exists (a managed file that exists
// but cannot be read is an error, never skipped). It is a JSON object
// holding a server map ("mcpServers" or "servers"), a server policy
// ("allowedMcpServers", "deniedMcpServers"; see Policy), or both; a
// managed file with neither is an error.
//
// Then the servers. With opts.Files set it loads exactly those files.
// Otherwise, if the managed file holds a server map, it loads only that
// map: the managed file is exclusive. If not (no managed file, or one
// holding only a policy), it loads the layers that exist, lowest
// precedence first: user <Home>/.mcp.json, project <Dir>/.mcp.json, local
// <Dir>/.mcp.local.json. A layer that does not exist is skipped; so is a
// layer that exists but does not load (unreadable, not JSON, a rejected
// entry): it is reported in Config.Skipped with its errors, and the other
// layers load without it. The same file reached twice
// (Home equal to Dir) is loaded once. Finding no file at all is not an
// error: the Config is empty.
//
// The servers of an untrusted layer (project, local, or a host layer not
// marked Trusted) start only once the user approved their entry as
// written, in this project directory (opts.Approvals), and, once it is
// loaded with every default, layer and policy applied and its paths
// resolved to real paths, what it launches (LaunchApprovals; see
// Config.Approval and docs/trust.md): the others are held — in Servers
// with NeedsApproval set, unexpanded, and in Pending with what to show
// the user. A disabled entry of an untrusted layer is
// loaded disabled, unexpanded, without approval.
//
// Last, the policies: the managed file's, then opts.Policy. Each server
// that fails one is moved from Servers (and Sources) to Excluded with the
// reason; Config.Policies holds the policies for Config.Check. A held
// server is checked once approved (its entry is expanded only then),
// except against projectServers "deny", which excludes every server of
// an untrusted layer. A policy's requireSandbox (see Policy) is
// applied first: a stdio server it covers gets the default sandbox when
// it has none (a held one in its PendingServer.Sandbox), and is excluded
// when its sandbox is disabled. Policy lists in files other than the managed file
// are ignored like any other unknown top-level member.
//
// Files are read as described at LoadFiles. On error the Config is
// nil and the error holds every problem found, each a *Error (the
// one exception: failing to find the working directory when Dir is empty
// and the layers are loaded).
func Load(opts Options) (*Config, error) {
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	lookup = withWorkspace(lookup, opts.Dir)

	var errs []error
	var policies []Policy

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
			errs = append(errs, &Error{File: managed, Err: errors.New(
				`no "mcpServers", "servers", "allowedMcpServers", "deniedMcpServers", "projectServers" or "requireSandbox" member`)})
		}
		if hasPolicy {
			policy.Source = managed
			policies = append(policies, policy)
		}
		managedTop = top
	case !errors.Is(err, fs.ErrNotExist):
		// A policy file we cannot see must not be silently ignored.
		errs = append(errs, &Error{File: managed, Err: fileError(err)})
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
		cfg.addFile(layerFile{LayerManaged, managed, true}, servers, nil, nil)
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
	if managedTop != nil {
		perms, e := parsePermissions(managedTop)
		if e != nil {
			e.File = managed
			return nil, e
		}
		cfg.addPermissions(perms, true)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Servers)) {
		sc := cfg.Servers[name]
		var pending *PendingServer
		if p, held := cfg.Pending[name]; held {
			pending = &p
		}
		if refused, reason := requireSandbox(policies, name, cfg.Layers[name], cfg.untrusted[name], &sc, pending); refused {
			cfg.exclude(name, reason)
			continue
		}
		cfg.Servers[name] = sc
		if pending != nil {
			cfg.Pending[name] = *pending
		}
		for i := range policies {
			ok, reason := true, ""
			switch {
			case cfg.untrusted[name] && policies[i].ProjectServers == ProjectServersDeny:
				ok, reason = false, policies[i].reason(`projectServers is "deny": servers of untrusted layers (the project's config files) may not run`)
			case sc.NeedsApproval == "":
				ok, reason = policies[i].check(name, sc)
			}
			if !ok {
				cfg.exclude(name, reason)
				break
			}
		}
	}
	cfg.checkLaunches(opts.Approvals, lookup)
	loaded := opts
	cfg.loadedWith = &loaded
	return cfg, nil
}

// LoadFiles loads the named files in order, expanding references
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
// is the project directory, absolute (Options.Dir, or the working
// directory), whatever the environment says; ${input:id} is an error
// (ErrInputVariable). A sandbox path may also start with ~ (the home
// directory: Options.Home, else the user's), and a relative one is
// relative to the directory of its file. A top-level "sandbox" member
// (true, false or an object, as in an entry) is the default of the
// file's stdio servers that have no "sandbox" of their own ("sandbox":
// false in an entry opts out). Each entry is then checked with
// mcpvisor.ServerConfig.Validate; the empty server name is rejected.
//
// On error the Config is nil and the error holds every problem found (at
// most one per server entry), each a *Error.
func LoadFiles(paths ...string) (*Config, error) {
	ld := &loader{lookup: withWorkspace(os.LookupEnv, ""), home: userHome("")}
	cfg, errs := ld.load(explicitFiles(paths), false)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// newConfig returns an empty Config with its maps made.
func newConfig() *Config {
	return &Config{Servers: map[string]mcpvisor.ServerConfig{}, Sources: map[string]string{}, Layers: map[string]string{},
		Pending: map[string]PendingServer{}, Excluded: map[string]string{}}
}

// exclude moves the server name to Excluded with the reason.
func (c *Config) exclude(name, reason string) {
	c.Excluded[name] = reason
	delete(c.Servers, name)
	delete(c.Sources, name)
	delete(c.Layers, name)
	delete(c.Pending, name)
}

// addFile records that the file of layer l was loaded and defines
// servers, of which pending are held and approved are approved as
// written (their launch is checked last: checkLaunches).
func (c *Config) addFile(l layerFile, servers map[string]mcpvisor.ServerConfig, pending, approved map[string]PendingServer) {
	c.Files = append(c.Files, l.path)
	for name, sc := range servers {
		sc.Scope = l.layer
		if l.trusted {
			if c.trustedEntries == nil {
				c.trustedEntries = map[string]mcpvisor.ServerConfig{}
			}
			c.trustedEntries[name] = sc
			delete(c.Lowered, name)
		} else {
			var base *mcpvisor.ServerConfig
			if b, ok := c.trustedEntries[name]; ok {
				base = &b
			}
			delete(c.Lowered, name)
			c.lowerUntrusted(name, &sc, base)
		}
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
		if p, ok := approved[name]; ok {
			if c.approvedEntries == nil {
				c.approvedEntries = map[string]PendingServer{}
			}
			c.approvedEntries[name] = p
		} else {
			delete(c.approvedEntries, name)
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

// load loads files in order. With layered (discovered layers, not files
// the user named), files that do not exist are skipped, and files that
// do not load are skipped and reported in Config.Skipped; otherwise each
// file must load. With errors, the Config is nil.
func (ld *loader) load(files []layerFile, layered bool) (*Config, []error) {
	cfg := newConfig()
	var errs []error
	seen := map[string]bool{}
	for _, l := range files {
		file := l.path
		if layered {
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
			switch {
			case layered && errors.Is(err, fs.ErrNotExist):
			case layered:
				cfg.skip(l, &Error{File: file, Err: fileError(err)})
			default:
				errs = append(errs, &Error{File: file, Err: fileError(err)})
			}
			continue
		}
		var gate *approvalGate
		var approved map[string]PendingServer
		if !l.trusted {
			gate = &approvalGate{layer: l.layer, file: file, project: ld.project, approvals: ld.approvals, workspace: ld.workspaceOnly}
		}
		servers, pending, perms, fileErrs := parseFile(data, expanderFor(file, ld.lookup, ld.home), gate)
		for _, e := range fileErrs {
			e.File = file
		}
		switch {
		case len(fileErrs) == 0:
			if gate != nil {
				approved = gate.approved
			}
			cfg.addFile(l, servers, pending, approved)
			cfg.addPermissions(perms, l.trusted)
		case layered:
			cfg.skip(l, fileErrs...)
		default:
			for _, e := range fileErrs {
				errs = append(errs, e)
			}
		}
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

// fileError drops the file name from an *fs.PathError, which Error
// already names; errors.Is(err, fs.ErrNotExist) still holds.
func fileError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

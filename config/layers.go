package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/trust"
)

// The layer names Load reports (Config.Layers).
// A host's own layers (Options.Layers) are reported by their Name.
const (
	// LayerUser is <Home>/.mcp.json: the user's own servers. Trusted.
	LayerUser = "user"
	// LayerProject is <Dir>/.mcp.json: a project's servers, which anyone
	// who can write to the project chose. Untrusted: each entry needs the
	// user's approval.
	LayerProject = "project"
	// LayerLocal is <Dir>/.mcp.local.json. It lives in the project
	// directory too, so it is untrusted like LayerProject.
	LayerLocal = "local"
	// LayerManaged is the managed (administrator) file. Trusted.
	LayerManaged = "managed"
	// LayerFile is a file named explicitly (Options.Files, the CLI's
	// --config). Trusted: the user chose it.
	LayerFile = "file"
)

// Layer is one config file a host has Load read instead of
// the standard layers (Options.Layers).
type Layer struct {
	// Name is the layer's name as Load reports it (Config.Layers).
	Name string
	// File is the file; a layer whose file does not exist is skipped.
	File string
	// Trusted layers' servers start as configured. The servers of an
	// untrusted layer (the zero value: the safe default) are held until
	// the user approves their entries (Options.Approvals).
	Trusted bool
}

// Approvals answers whether the user approved a server entry of an
// untrusted layer. *trust.Store implements it (approvals kept in the
// user's state directory).
type Approvals interface {
	// Approved reports whether the entry of server whose hash is
	// trust.EntryHash of the entry as written was approved for the
	// project directory project (absolute). When not, changed reports
	// whether another version of the entry was.
	Approved(project, server, hash string) (approved, changed bool, err error)
}

// PendingServer is a server entry of an untrusted layer that the user has
// not approved: what to show the user before approving it.
type PendingServer struct {
	// Name, Layer and File say where the entry is.
	Name  string
	Layer string
	File  string
	// Project is the directory the approval is for: Options.Dir (or
	// the working directory), absolute, symbolic links resolved.
	Project string
	// Entry is the entry as written in File, before ${VAR} expansion.
	Entry json.RawMessage
	// Hash is trust.EntryHash(Entry): the approval of the entry as
	// written. An approval covers what the entry launches too
	// (Config.Approval, LaunchChanges).
	Hash string
	// Variables are the ${VAR} references of the entry's expanded members
	// (command, args, env values, cwd, url, header values, tls): the
	// variables its expansion would read, sorted, each once (the
	// reference as written, without ${ } and default, when it is not a
	// plain name).
	Variables []string
	// EnvFile is the entry's envFile, resolved (empty when it has none, or
	// when its path needs a variable other than ${workspaceFolder}), and
	// EnvFileVariables the names (never the values) the file sets, read
	// only when it is a regular file. The approval covers the file's
	// contents too (its launch, whose env holds them): a changed file
	// needs a new approval, since its variables (PATH, NODE_OPTIONS,
	// LD_PRELOAD…) decide what the server runs.
	EnvFile          string
	EnvFileVariables []string
	// Sandbox is the sandbox the server would run under once approved,
	// nil for none (unconfined): its entry's "sandbox", else its file's
	// top-level default (stdio servers), else the default sandbox when a
	// policy requires one (SandboxRequiredBy). Its paths are as written,
	// not expanded: ~, ${VAR} and relative paths are resolved when the
	// entry is approved and loaded. For an entry held because what it
	// launches changed (LaunchChanges), it is the sandbox it would now
	// run under, its paths resolved.
	Sandbox *transports.Sandbox
	// SandboxRequiredBy is the Source of the policy that requires the
	// server to run confined (requireSandbox), empty when none does.
	SandboxRequiredBy string
	// Changed is set when another version of the entry was approved: the
	// entry changed since, or what it launches did (LaunchChanges).
	Changed bool
	// LaunchChanges lists, when the entry as written is the one approved
	// but what it launches is not (an env file, a symbolic link, the
	// file's default sandbox, the executable found in PATH, a ${VAR}
	// changed), what differs, one line per member (trust.DiffLaunch:
	// values that may be secrets show as digests).
	LaunchChanges []string
	// shownLaunch is the digest of the launch LaunchChanges describes
	// (empty when there is none): Config.Approval approves that launch
	// and no other.
	shownLaunch string
	// Reason is why the server is held, as its status reports it.
	Reason string
}

// DefaultStateDir is the directory that keeps the user's trust decisions
// (approvals of project servers, tool pins) when a host names none; see
// trust.DefaultDir. A host opens it with trust.NewStore and passes the
// store as Options.Approvals and mcpvisor.Options.ToolPins.Store.
func DefaultStateDir() (string, error) { return trust.DefaultDir() }

// layerFile is one file to load, with its layer.
type layerFile struct {
	layer   string
	path    string
	trusted bool
}

// standardLayers are the user, project and local layers.
func standardLayers(home, dir string) []layerFile {
	var out []layerFile
	if home != "" {
		out = append(out, layerFile{LayerUser, filepath.Join(home, ".mcp.json"), true})
	}
	return append(out, layerFile{LayerProject, filepath.Join(dir, ".mcp.json"), false},
		layerFile{LayerLocal, filepath.Join(dir, ".mcp.local.json"), false})
}

// projectKey is the directory an approval is for: dir made absolute, its
// symbolic links resolved when they can be.
func projectKey(dir string) string {
	if dir == "" {
		dir = "."
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return filepath.Clean(dir)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// approvalGate decides the entries of one untrusted layer file.
type approvalGate struct {
	layer, file, project string
	approvals            Approvals // nil approves nothing
	// workspace resolves ${workspaceFolder} alone, for the envFile of an
	// entry not yet approved (whose other references are not expanded).
	workspace func(string) (string, bool)
	// approved holds what would be pending of each entry whose text is
	// approved: checkLaunches holds it when its launch is not.
	approved map[string]PendingServer
}

// decide reports whether the entry raw of server name is approved, and
// when not, what is pending. sc is the entry decoded, not expanded.
func (g *approvalGate) decide(name string, raw json.RawMessage, sc *mcpvisor.ServerConfig) (bool, *PendingServer) {
	p := &PendingServer{Name: name, Layer: g.layer, File: g.file, Project: g.project, Entry: raw, Variables: variables(sc)}
	hash, err := trust.EntryHash(raw)
	if sc.EnvFile != "" {
		g.withEnvFile(p, sc.EnvFile)
	}
	if err != nil { // cannot happen: the entry decoded
		p.Reason = fmt.Sprintf("%q layer entry (%s) cannot be identified for approval: %v", g.layer, g.file, err)
		return false, p
	}
	p.Hash = hash
	if g.approvals == nil {
		p.Reason = fmt.Sprintf("%q layer entry (%s) is not approved (no approvals are kept)", g.layer, g.file)
		return false, p
	}
	approved, changed, err := g.approvals.Approved(g.project, name, hash)
	switch {
	case err != nil:
		p.Reason = fmt.Sprintf("%q layer entry (%s) is not approved: the approvals cannot be read: %v", g.layer, g.file, err)
	case approved:
		if g.approved == nil {
			g.approved = map[string]PendingServer{}
		}
		g.approved[name] = *p // for checkLaunches, should the launch differ
		return true, nil
	case changed:
		p.Changed = true
		p.Reason = fmt.Sprintf("%q layer entry (%s) changed since it was approved", g.layer, g.file)
	default:
		p.Reason = fmt.Sprintf("%q layer entry (%s) is not approved", g.layer, g.file)
	}
	return false, p
}

// withEnvFile fills p's EnvFile members: the file's path when it needs no
// variable but ${workspaceFolder}, and the names it sets when it is a
// regular file that parses (see readEnvFileBytes). The approval of the
// entry as written does not cover the file: the launch does, once the
// text is approved (see checkLaunches).
func (g *approvalGate) withEnvFile(p *PendingServer, envFile string) {
	lookup := g.workspace
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	if path, err := expand(envFile, lookup); err == nil {
		p.EnvFile = envFilePath(path, filepath.Dir(g.file))
		if vars, _, err := readEnvFile(p.EnvFile); err == nil {
			p.EnvFileVariables = slices.Sorted(maps.Keys(vars))
		}
	}
}

// heldConfig is what the supervisor gets of an entry held for approval:
// its transport type (for status), the reason, and nothing that would
// start or reach anything.
func heldConfig(sc *mcpvisor.ServerConfig, reason string) mcpvisor.ServerConfig {
	return mcpvisor.ServerConfig{Config: transports.Config{Type: sc.Kind()}, NeedsApproval: reason}
}

// variables lists the ${VAR} references of sc's expanded members.
func variables(sc *mcpvisor.ServerConfig) []string {
	var out []string
	_ = walkExpandable(sc, "", func(s *string, _ string) *Error {
		rest := *s
		for {
			i := strings.Index(rest, "${")
			if i < 0 {
				return nil
			}
			rest = rest[i+2:]
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return nil
			}
			name, _, _ := strings.Cut(rest[:end], ":-")
			out = append(out, name)
			rest = rest[end+1:]
		}
	})
	slices.Sort(out)
	return slices.Compact(out)
}

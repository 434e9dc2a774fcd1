package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcpvisor/mcpvisor/cmd/mcpvisor/internal/mcpfile"
	"github.com/mcpvisor/mcpvisor/config"
)

// The scopes of add, remove and get: the layer files of the loader, named
// as `claude mcp add --scope` names them. (Claude Code keeps its user and
// local scopes in ~/.claude.json; mcpvisor's loader reads these files.)
const (
	scopeUser    = config.LayerUser    // <Home>/.mcp.json
	scopeProject = config.LayerProject // ./.mcp.json
	scopeLocal   = config.LayerLocal   // ./.mcp.local.json
	scopeConfig  = config.LayerFile    // a --config file
	scopeManaged = config.LayerManaged // the managed file: read, never edited
)

// defaultScope is where add writes without --scope: local, as with
// `claude mcp add`.
const defaultScope = scopeLocal

// scopeFile is one config file add, remove and get work on.
type scopeFile struct {
	scope string // scopeUser, scopeProject, scopeLocal, scopeConfig or scopeManaged
	path  string // as the loader names it (Config.Sources)
}

// trusted reports whether the servers of the file start without the
// user's approval (see docs/trust.md).
func (s scopeFile) trusted() bool { return s.scope != scopeProject && s.scope != scopeLocal }

// newFileMode is the mode of a file add creates: a project's .mcp.json is
// meant to be shared (committed); the others are the user's own and may
// hold secrets in env and headers.
func (s scopeFile) newFileMode() fs.FileMode {
	if s.scope == scopeProject {
		return 0o644
	}
	return 0o600
}

func (s scopeFile) String() string { return s.scope + " (" + s.path + ")" }

// editableScopes are the files add and remove may write, lowest
// precedence first, as the loader reads them: the --config files, else
// the user, project and local layers. A file reached twice (the project
// directory is the home directory) is listed once, under its first scope.
func (c *configFiles) editableScopes() ([]scopeFile, error) {
	if len(c.files) > 0 {
		out := make([]scopeFile, len(c.files))
		for i, f := range c.files {
			out[i] = scopeFile{scopeConfig, f}
		}
		return dedupScopes(out), nil
	}
	all, err := standardScopes()
	if err != nil {
		return nil, err
	}
	return dedupScopes(all), nil
}

// standardScopes are the user (when there is a home directory), project
// and local layer files, joined as the loader joins them.
func standardScopes() ([]scopeFile, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("finding the project directory: %w", err)
	}
	var out []scopeFile
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		out = append(out, scopeFile{scopeUser, filepath.Join(home, ".mcp.json")})
	}
	return append(out, scopeFile{scopeProject, filepath.Join(dir, ".mcp.json")},
		scopeFile{scopeLocal, filepath.Join(dir, ".mcp.local.json")}), nil
}

func dedupScopes(in []scopeFile) []scopeFile {
	seen := map[string]bool{}
	var out []scopeFile
	for _, s := range in {
		key, err := filepath.Abs(s.path)
		if err != nil {
			key = filepath.Clean(s.path)
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, s)
		}
	}
	return out
}

// scopeByName resolves --scope for add and remove. With --config there
// is no scope to choose: add writes the one file named.
func (c *configFiles) scopeByName(name string) (scopeFile, error) {
	if len(c.files) > 0 {
		if name != "" {
			return scopeFile{}, usageError("--scope picks one of the standard layer files; with --config the file is the one named")
		}
		if len(c.files) > 1 {
			return scopeFile{}, usageError("%d --config files: name the one file to write", len(c.files))
		}
		return scopeFile{scopeConfig, c.files[0]}, nil
	}
	if name == "" {
		name = defaultScope
	}
	switch name {
	case scopeUser, scopeProject, scopeLocal:
	default:
		return scopeFile{}, usageError("--scope %q: want user, project or local", name)
	}
	all, err := standardScopes()
	if err != nil {
		return scopeFile{}, failed(err)
	}
	for _, s := range all {
		if s.scope == name {
			return s, nil
		}
	}
	return scopeFile{}, failed(errors.New("no home directory: there is no user scope"))
}

// definition is one entry of a server in one scope file.
type definition struct {
	scopeFile
	file  *mcpfile.File
	entry []byte // as written
}

// definitionsOf finds server name in the files of scopes, in their order.
// A file that cannot be read or parsed is reported on the log and
// skipped: the caller says what it could not see.
func (c *configFiles) definitionsOf(name string, scopes []scopeFile) (defs []definition, unreadable []scopeFile) {
	for _, s := range scopes {
		data, err := mcpfile.Read(s.path)
		if err == nil && data == nil {
			continue // no such file
		}
		var f *mcpfile.File
		if err == nil {
			f, err = mcpfile.Parse(data)
		}
		if err != nil {
			c.out.log.Warn().Err(err).Str("file", s.path).Msg("cannot read this config file: its servers are not considered")
			unreadable = append(unreadable, s)
			continue
		}
		if raw, ok := f.Entry(name); ok {
			defs = append(defs, definition{scopeFile: s, file: f, entry: raw})
		}
	}
	return defs, unreadable
}

// describeScopes lists scope files for a message, one per line.
func describeScopes(scopes []scopeFile) string {
	var b strings.Builder
	for _, s := range scopes {
		fmt.Fprintf(&b, "\n  %-8s %s", s.scope, s.path)
	}
	return b.String()
}

// managedScope is the managed file when it exists and holds a server
// map: then it is the only file the loader reads (besides --config).
func managedScope() (scopeFile, bool) {
	data, err := mcpfile.Read(config.DefaultManagedFile)
	if err != nil || data == nil {
		return scopeFile{}, false
	}
	f, err := mcpfile.Parse(data)
	if err != nil || f.MapName() == "" {
		return scopeFile{}, false
	}
	return scopeFile{scopeManaged, config.DefaultManagedFile}, true
}

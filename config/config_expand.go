package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
)

// ErrUnsetVariable is wrapped (inside a *Error) when a ${VAR}
// reference without a default names a variable that is not set. The
// message names the variable.
var ErrUnsetVariable = errors.New("environment variable is not set")

// ErrInputVariable is wrapped (inside a *Error) when a value holds a
// VS Code input variable, ${input:id}: mcpvisor has no one to prompt. The
// message names the reference.
var ErrInputVariable = errors.New("VS Code input variables are not supported; set the value in env or the file")

// workspaceFolderVar is the VS Code variable that expands to the project
// directory.
const workspaceFolderVar = "workspaceFolder"

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

// expandServer expands references in the members that allow them.
func expandServer(sc *mcpvisor.ServerConfig, path string, x expander) *Error {
	if sc.Sandbox != nil {
		if e := x.sandbox(sc.Sandbox, pathKey(path, "sandbox")); e != nil {
			return e
		}
	}
	return walkExpandable(sc, path, func(s *string, p string) *Error {
		v, err := expand(*s, x.lookup)
		if err != nil {
			return &Error{Path: p, Err: err}
		}
		*s = v
		return nil
	})
}

// walkExpandable calls one on every member of sc that ${VAR} references
// may appear in (command, args, env values, cwd, envFile, url, the tls
// members, header values), with its path, and stops at the first error.
func walkExpandable(sc *mcpvisor.ServerConfig, path string, one func(s *string, path string) *Error) *Error {
	mapValues := func(m map[string]string, p string) *Error {
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
func (x expander) sandbox(sb *transports.Sandbox, path string) *Error {
	for _, list := range []struct {
		name  string
		paths []string
	}{{"write", sb.Write}, {"read", sb.Read}} {
		for i, p := range list.paths {
			at := pathIndex(pathKey(path, list.name), i)
			v, err := expand(p, x.lookup)
			if err != nil {
				return &Error{Path: at, Err: err}
			}
			switch {
			case v == "~" || strings.HasPrefix(v, "~/"):
				if x.home == "" {
					return &Error{Path: at, Err: errors.New("~ names the home directory, which is unknown")}
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

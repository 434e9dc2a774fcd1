package mcpvisor

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
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

	// Files lists the files that were read, in load order (lowest
	// precedence first). Missing layer files that were skipped are not
	// listed.
	Files []string
}

// DefaultManagedFile is the managed (administrator) config file that
// LoadConfig looks for when LoadOptions.ManagedFile is empty. When it
// exists it is the only file loaded.
const DefaultManagedFile = "/etc/mcpvisor/managed-mcp.json"

// ErrUnsetVariable is wrapped (inside a *ConfigError) when a ${VAR}
// reference without a default names a variable that is not set. The
// message names the variable.
var ErrUnsetVariable = errors.New("environment variable is not set")

// ConfigError reports a problem in one config file. Every error that
// LoadConfig and LoadConfigFiles return for a file's content or for reading
// it is a *ConfigError (several are combined with errors.Join; errors.As
// finds the first).
type ConfigError struct {
	// File is the file as named to the loader.
	File string

	// Path locates the problem inside the file, in JavaScript-like
	// notation: mcpServers.github.args[2], servers["my.server"].env.TOKEN.
	// Members whose name is not made of letters, digits, '_' and '-' are
	// written as quoted indexes. Path is empty when the problem concerns
	// the whole file (unreadable, not JSON, no server map).
	Path string

	// Err is the problem.
	Err error
}

func (e *ConfigError) Error() string {
	if e.Path == "" {
		return e.File + ": " + e.Err.Error()
	}
	return e.File + ": " + e.Path + ": " + e.Err.Error()
}

// Unwrap returns Err.
func (e *ConfigError) Unwrap() error { return e.Err }

// LoadOptions select the files LoadConfig reads and how it expands them.
// The zero value does the standard layered discovery with the process
// environment.
type LoadOptions struct {
	// Files, when not empty, are the only files loaded, in order (later
	// files win); each must exist. Home, Dir and ManagedFile are then
	// ignored, the managed file included.
	Files []string

	// Home is the directory holding the user layer (<Home>/.mcp.json).
	// Empty means os.UserHomeDir; if that fails, the user layer is
	// skipped.
	Home string

	// Dir is the project directory holding the project layer
	// (<Dir>/.mcp.json) and the local layer (<Dir>/.mcp.local.json).
	// Empty means the working directory.
	Dir string

	// ManagedFile is the managed config file. Empty means
	// DefaultManagedFile.
	ManagedFile string

	// LookupEnv resolves ${VAR} references. Nil means os.LookupEnv.
	LookupEnv func(name string) (value string, ok bool)
}

// LoadConfig loads the servers a host should run.
//
// With opts.Files set it loads exactly those files. Otherwise, if the
// managed file exists, it loads only that file; if not, it loads the layers
// that exist, lowest precedence first: user <Home>/.mcp.json, project
// <Dir>/.mcp.json, local <Dir>/.mcp.local.json. A layer that does not exist
// is skipped; a layer that exists but cannot be read is an error. The same
// file reached twice (Home equal to Dir) is loaded once. Finding no file at
// all is not an error: the Config is empty.
//
// Files are read as described at LoadConfigFiles. On error the Config is
// nil and the error holds every problem found, each a *ConfigError (the
// one exception: failing to find the working directory when Dir is empty).
func LoadConfig(opts LoadOptions) (*Config, error) {
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if len(opts.Files) > 0 {
		return loadFiles(opts.Files, false, lookup)
	}

	managed := opts.ManagedFile
	if managed == "" {
		managed = DefaultManagedFile
	}
	switch _, err := os.Stat(managed); {
	case err == nil:
		return loadFiles([]string{managed}, false, lookup)
	case !errors.Is(err, fs.ErrNotExist):
		// A policy file we cannot see must not be silently ignored.
		return nil, &ConfigError{File: managed, Err: fileError(err)}
	}

	var layers []string
	home := opts.Home
	if home == "" {
		home, _ = os.UserHomeDir() // no home: no user layer
	}
	if home != "" {
		layers = append(layers, filepath.Join(home, ".mcp.json"))
	}
	dir := opts.Dir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("mcpvisor: finding the project directory: %w", err)
		}
		dir = wd
	}
	layers = append(layers, filepath.Join(dir, ".mcp.json"), filepath.Join(dir, ".mcp.local.json"))
	return loadFiles(layers, true, lookup)
}

// LoadConfigFiles loads the named files in order, expanding references
// from the process environment. Every file must exist.
//
// A file is a JSON object (strict JSON: no comments or trailing commas)
// holding its servers either under "mcpServers" (the .mcp.json format of
// Claude Code, Claude Desktop and Cursor) or under "servers" (VS Code's
// mcp.json), not both; other top-level members are ignored. A server
// defined by several files takes the entry of the last one, whole: entries
// are never merged member by member.
//
// Inside an entry, unknown members are ignored and null means absent, but
// a known member of the wrong JSON type is an error. Member names are
// case-sensitive. In command, args, env values, cwd, url and header values
// (nowhere else, and never in keys) ${VAR} is replaced by the variable's
// value and ${VAR:-default} by the value, or by default when the variable
// is unset or empty. A ${VAR} whose variable is unset is an error
// (ErrUnsetVariable), never an empty string. Only "${" starts a reference:
// a lone "$" and "$$" are literal. Names are letters, digits and '_', not
// starting with a digit; defaults may contain anything but "}" and "${".
// Each entry is then checked with ServerConfig.Validate; the empty server
// name is rejected.
//
// On error the Config is nil and the error holds every problem found (at
// most one per server entry), each a *ConfigError.
func LoadConfigFiles(paths ...string) (*Config, error) {
	return loadFiles(paths, false, os.LookupEnv)
}

// loadFiles loads paths in order. With skipMissing, files that do not exist
// are skipped.
func loadFiles(paths []string, skipMissing bool, lookup func(string) (string, bool)) (*Config, error) {
	cfg := &Config{Servers: map[string]ServerConfig{}, Sources: map[string]string{}}
	var errs []error
	seen := map[string]bool{}
	for _, file := range paths {
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
		cfg.Files = append(cfg.Files, file)
		servers, fileErrs := parseFile(data, lookup)
		for _, e := range fileErrs {
			e.File = file
			errs = append(errs, e)
		}
		for name, sc := range servers {
			cfg.Servers[name] = sc
			cfg.Sources[name] = file
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
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

// parseFile decodes, expands and validates one file's servers. The errors
// it returns lack File.
func parseFile(data []byte, lookup func(string) (string, bool)) (map[string]ServerConfig, []*ConfigError) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			line, col := lineCol(data, syn.Offset-1) // Offset counts the bad byte
			return nil, []*ConfigError{{Err: fmt.Errorf("invalid JSON at line %d, column %d: %w", line, col, err)}}
		}
		return nil, []*ConfigError{{Err: fmt.Errorf(`want a JSON object with "mcpServers" or "servers", got %s`, jsonKind(data))}}
	}
	if top == nil { // the file is "null"
		return nil, []*ConfigError{{Err: errors.New(`want a JSON object with "mcpServers" or "servers", got null`)}}
	}
	mcpServers, hasMCP := top["mcpServers"]
	vsServers, hasVS := top["servers"]
	var root string
	var rawServers json.RawMessage
	switch {
	case hasMCP && hasVS:
		return nil, []*ConfigError{{Err: errors.New(`has both "mcpServers" and "servers"; use one`)}}
	case hasMCP:
		root, rawServers = "mcpServers", mcpServers
	case hasVS:
		root, rawServers = "servers", vsServers
	default:
		return nil, []*ConfigError{{Err: errors.New(`no "mcpServers" or "servers" member`)}}
	}

	var entries map[string]json.RawMessage
	if k := jsonKind(rawServers); k != "object" {
		return nil, []*ConfigError{{Path: root, Err: fmt.Errorf("want object, got %s", k)}}
	}
	if err := json.Unmarshal(rawServers, &entries); err != nil {
		return nil, []*ConfigError{{Path: root, Err: err}}
	}

	servers := make(map[string]ServerConfig, len(entries))
	var errs []*ConfigError
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
		if e := expandServer(&sc, path, lookup); e != nil {
			errs = append(errs, e)
			continue
		}
		if err := sc.Validate(); err != nil {
			errs = append(errs, &ConfigError{Path: path, Err: err})
			continue
		}
		servers[name] = sc
	}
	return servers, errs
}

// expandServer expands references in the members that allow them.
func expandServer(sc *ServerConfig, path string, lookup func(string) (string, bool)) *ConfigError {
	one := func(s *string, p string) *ConfigError {
		v, err := expand(*s, lookup)
		if err != nil {
			return &ConfigError{Path: p, Err: err}
		}
		*s = v
		return nil
	}
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
			if n, _, ok := strings.Cut(name, ":"); ok && isVarName(n) {
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

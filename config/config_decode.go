package config

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
)

// parseFile decodes, expands and validates one file's servers; with a
// gate (an untrusted layer), the entries it does not approve are held
// instead, unexpanded. The errors it returns lack File.
func parseFile(data []byte, x expander, gate *approvalGate) (map[string]mcpvisor.ServerConfig, map[string]PendingServer, mcpvisor.PermissionRules, []*Error) {
	top, e := decodeTop(data, false)
	if e != nil {
		return nil, nil, mcpvisor.PermissionRules{}, []*Error{e}
	}
	servers, pending, errs := parseServers(top, x, gate)
	perms, e := parsePermissions(top)
	if e != nil {
		errs = append(errs, e)
	}
	return servers, pending, perms, errs
}

// decodeTop decodes a file's top-level object. The error lacks File.
func decodeTop(data []byte, managed bool) (map[string]json.RawMessage, *Error) {
	want := `want a JSON object with "mcpServers" or "servers"`
	if managed {
		want = `want a JSON object with "mcpServers", "servers", "allowedMcpServers", "deniedMcpServers", "projectServers" or "requireSandbox"`
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			line, col := lineCol(data, syn.Offset-1) // Offset counts the bad byte
			return nil, &Error{Err: fmt.Errorf("invalid JSON at line %d, column %d: %w", line, col, err)}
		}
		return nil, &Error{Err: fmt.Errorf("%s, got %s", want, jsonKind(data))}
	}
	if top == nil { // the file is "null"
		return nil, &Error{Err: fmt.Errorf("%s, got null", want)}
	}
	return top, nil
}

// parseServers decodes, expands and validates the server map of a file's
// top-level object, expanding through x (relative envFile and sandbox
// paths are resolved against x.dir, the file's directory). With a gate,
// an entry it does not approve is held: it is validated unexpanded and
// returned as heldConfig, and pending says what to approve; a disabled
// entry is returned disabled, unexpanded. The errors it returns lack File.
func parseServers(top map[string]json.RawMessage, x expander, gate *approvalGate) (servers map[string]mcpvisor.ServerConfig, pending map[string]PendingServer, errs []*Error) {
	mcpServers, hasMCP := top["mcpServers"]
	vsServers, hasVS := top["servers"]
	var root string
	var rawServers json.RawMessage
	switch {
	case hasMCP && hasVS:
		return nil, nil, []*Error{{Err: errors.New(`has both "mcpServers" and "servers"; use one`)}}
	case hasMCP:
		root, rawServers = "mcpServers", mcpServers
	case hasVS:
		root, rawServers = "servers", vsServers
	default:
		return nil, nil, []*Error{{Err: errors.New(`no "mcpServers" or "servers" member`)}}
	}

	// The file's default sandbox, for its stdio servers that set none.
	// writtenSandbox is that default as written, for held entries.
	var defaultSandbox, writtenSandbox *transports.Sandbox
	if raw, ok := top["sandbox"]; ok && jsonKind(raw) != "null" {
		var sb transports.Sandbox
		if err := json.Unmarshal(raw, &sb); err != nil {
			return nil, nil, []*Error{{Path: "sandbox", Err: err}}
		}
		written := sb
		written.Write, written.Read = slices.Clone(sb.Write), slices.Clone(sb.Read)
		writtenSandbox = &written
		if e := x.sandbox(&sb, "sandbox"); e != nil {
			return nil, nil, []*Error{e}
		}
		if err := sb.Validate(); err != nil {
			return nil, nil, []*Error{{Path: "sandbox", Err: err}}
		}
		defaultSandbox = &sb
	}

	var entries map[string]json.RawMessage
	if k := jsonKind(rawServers); k != "object" {
		return nil, nil, []*Error{{Path: root, Err: fmt.Errorf("want object, got %s", k)}}
	}
	if err := json.Unmarshal(rawServers, &entries); err != nil {
		return nil, nil, []*Error{{Path: root, Err: err}}
	}

	servers = make(map[string]mcpvisor.ServerConfig, len(entries))
	pending = map[string]PendingServer{}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		path := pathKey(root, name)
		if name == "" {
			errs = append(errs, &Error{Path: path, Err: errors.New("server name must not be empty")})
			continue
		}
		var sc mcpvisor.ServerConfig
		if e := decodeValue(reflect.ValueOf(&sc).Elem(), entries[name], path); e != nil {
			errs = append(errs, e)
			continue
		}
		if gate != nil {
			if sc.Disabled { // never started: nothing to approve
				servers[name] = disabledEntry(&sc)
				continue
			}
			approved, p := gate.decide(name, entries[name], &sc)
			if !approved {
				if err := validateHeld(sc); err != nil {
					errs = append(errs, &Error{Path: path, Err: err})
					continue
				}
				servers[name] = heldConfig(&sc, p.Reason)
				p.Sandbox = sc.Sandbox
				if p.Sandbox == nil && writtenSandbox != nil && sc.Kind() == transports.TypeStdio {
					p.Sandbox = writtenSandbox
				}
				if p.Sandbox == nil && sc.Trust == mcpvisor.TrustSandbox && sc.Kind() == transports.TypeStdio {
					p.Sandbox = &transports.Sandbox{Enabled: true}
				}
				pending[name] = *p
				continue
			}
		}
		if e := expandServer(&sc, path, x); e != nil {
			if sc.Disabled { // never started: what it would need does not matter
				servers[name] = disabledEntry(&sc)
				continue
			}
			errs = append(errs, e)
			continue
		}
		if sc.Sandbox == nil && defaultSandbox != nil && sc.Kind() == transports.TypeStdio {
			sb := *defaultSandbox
			sb.Write, sb.Read = slices.Clone(sb.Write), slices.Clone(sb.Read)
			sc.Sandbox = &sb
		}
		if sc.Sandbox == nil && sc.Trust == mcpvisor.TrustSandbox && sc.Kind() == transports.TypeStdio {
			sc.Sandbox = &transports.Sandbox{Enabled: true} // trust "sandbox" is "sandbox": true
		}
		if err := sc.Validate(); err != nil {
			errs = append(errs, &Error{Path: path, Err: err})
			continue
		}
		if err := mergeEnvFile(&sc, x.dir); err != nil {
			if sc.Disabled {
				servers[name] = disabledEntry(&sc)
				continue
			}
			errs = append(errs, &Error{Path: pathKey(path, "envFile"), Err: err})
			continue
		}
		servers[name] = sc
	}
	return servers, pending, errs
}

// disabledEntry is a disabled entry loaded without its details: its
// transport's kind, and disabled. It is never started, so nothing it
// would need to start (a command, a URL, its variables, its envFile) is
// asked of it, and nothing of it is expanded.
func disabledEntry(sc *mcpvisor.ServerConfig) mcpvisor.ServerConfig {
	return mcpvisor.ServerConfig{Config: transports.Config{Type: sc.Kind()}, Disabled: true}
}

// validateHeld validates an entry held for approval, which is not
// expanded: its sandbox paths are still as written (~/x, ./out,
// ${VAR}/y), so they are checked for everything but being absolute,
// which expansion makes them.
func validateHeld(sc mcpvisor.ServerConfig) error {
	if sb := sc.Sandbox; sb != nil {
		written := *sb
		rooted := func(paths []string) []string {
			out := make([]string, len(paths))
			for i, p := range paths {
				if p != "" && !filepath.IsAbs(p) {
					p = string(filepath.Separator) + p // stands for the expanded path
				}
				out[i] = p
			}
			return out
		}
		written.Write, written.Read = rooted(sb.Write), rooted(sb.Read)
		sc.Sandbox = &written
	}
	return sc.Validate()
}

// pathKey appends member key to a Error path.
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

// pathIndex appends array index i to a Error path.
func pathIndex(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// decodeValue decodes the JSON value raw into v, which must be settable.
// It does what encoding/json does for the types a mcpvisor.ServerConfig is made of,
// but reports the path of a member of the wrong type (encoding/json names
// the struct field, not the array index or map key), ignores unknown
// members, matches member names case-sensitively, and rejects null array
// elements and map values. Walking the type by reflection keeps the
// decoder in step with mcpvisor.ServerConfig as members are added. Types with their
// own JSON or text decoding (json.RawMessage) are handed to encoding/json.
func decodeValue(v reflect.Value, raw json.RawMessage, path string) *Error {
	t := v.Type()
	pt := reflect.PointerTo(t)
	if pt.Implements(jsonUnmarshalerType) || pt.Implements(textUnmarshalerType) ||
		t.Kind() == reflect.Interface || (t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8) ||
		(t.Kind() == reflect.Map && t.Key().Kind() != reflect.String) {
		if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
			return &Error{Path: path, Err: err}
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
			return &Error{Path: path, Err: err}
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
			return &Error{Path: path, Err: err}
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
			return &Error{Path: path, Err: err}
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
			return &Error{Path: path, Err: fmt.Errorf("want integer, got %s", raw)}
		}
		return &Error{Path: path, Err: err}
	}
	return nil
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func typeError(path, want, got string) *Error {
	return &Error{Path: path, Err: fmt.Errorf("want %s, got %s", want, got)}
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

// Package mcpfile edits the server map of one .mcp.json-style config
// file in place: it adds or removes one server entry and leaves every
// other byte of the file as it was — other servers' entries, members it
// does not know (at the top level or inside entries), white space, member
// order, line endings.
//
// It reads the formats mcpvisor's loader reads: a JSON object holding its
// servers under "mcpServers" (Claude Code, Claude Desktop, Cursor) or
// "servers" (VS Code), strict JSON.
package mcpfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Errors of Parse, Add and Remove. Parse's syntax errors are *SyntaxError.
var (
	// ErrNotObject: the file is valid JSON but not an object.
	ErrNotObject = errors.New(`not a JSON object`)
	// ErrBothMaps: the file has both "mcpServers" and "servers", which the
	// loader refuses.
	ErrBothMaps = errors.New(`has both "mcpServers" and "servers"; use one`)
	// ErrMapNotObject: the server map is not a JSON object.
	ErrMapNotObject = errors.New(`the server map is not a JSON object`)
	// ErrExists: Add was given a name the file already defines.
	ErrExists = errors.New("already defined in this file")
	// ErrNotFound: Remove was given a name the file does not define.
	ErrNotFound = errors.New("not defined in this file")
)

// The two names of the server map.
const (
	MapMCPServers = "mcpServers"
	MapServers    = "servers"
)

// File is the content of one config file, located far enough to edit
// its server map. The zero value is an empty file: Add writes a new one.
//
// Concurrency: a File is a value that is never modified after Parse;
// Add and Remove return new content and may be called concurrently.
type File struct {
	data    []byte
	blank   bool   // empty or white space only: Add writes a new file
	top     object // the top-level object (when not blank)
	mapName string // MapMCPServers, MapServers or "" (no server map)
	servers object // the server map (when mapName is set)
}

// Parse locates the server map of data, the content of a config file.
// Empty content (or white space only) is a file without servers, which
// Add replaces whole. Errors: *SyntaxError, ErrNotObject, ErrBothMaps,
// ErrMapNotObject.
func Parse(data []byte) (*File, error) {
	f := &File{data: data}
	start := skipSpace(data, 0)
	if start == len(data) {
		f.blank = true
		return f, nil
	}
	if err := checkSyntax(data); err != nil {
		return nil, err
	}
	if data[start] != '{' {
		return nil, fmt.Errorf("%w: it is %s", ErrNotObject, kind(data, start))
	}
	f.top = parseObject(data, start)
	mcp, vs := f.top.last(MapMCPServers), f.top.last(MapServers)
	var at int
	switch {
	case mcp >= 0 && vs >= 0:
		return nil, ErrBothMaps
	case mcp >= 0:
		f.mapName, at = MapMCPServers, mcp
	case vs >= 0:
		f.mapName, at = MapServers, vs
	default:
		return f, nil
	}
	v := f.top.members[at].value
	if data[v.start] != '{' {
		return nil, fmt.Errorf("%w: %q is %s", ErrMapNotObject, f.mapName, kind(data, v.start))
	}
	f.servers = parseObject(data, v.start)
	return f, nil
}

// MapName is the member holding the servers: MapMCPServers, MapServers,
// or "" when the file has none.
func (f *File) MapName() string { return f.mapName }

// Names lists the servers the file defines, in file order, each once.
func (f *File) Names() []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range f.servers.members {
		if !seen[m.name] {
			seen[m.name] = true
			out = append(out, m.name)
		}
	}
	return out
}

// Entry returns the entry of server name as written (the last one, as
// the loader takes it, when the name is repeated).
func (f *File) Entry(name string) (json.RawMessage, bool) {
	if f.mapName == "" {
		return nil, false
	}
	i := f.servers.last(name)
	if i < 0 {
		return nil, false
	}
	v := f.servers.members[i].value
	return json.RawMessage(f.data[v.start:v.end]), true
}

// Add returns the content with server name added, its entry being entry
// marshalled as JSON (HTML characters unescaped). The entry goes after
// the last server, written in the style of the file: its separator, its
// indentation unit and its line endings, on one line when the map is on
// one line. A file without a server map gets "mcpServers"; an empty file
// becomes {"mcpServers": {name: entry}}, indented by two spaces. Errors:
// ErrExists, or entry's marshalling error.
func (f *File) Add(name string, entry any) ([]byte, error) {
	if _, ok := f.Entry(name); ok {
		return nil, fmt.Errorf("%q: %w", name, ErrExists)
	}
	if _, err := marshal(entry, "", "", true); err != nil {
		return nil, err
	}
	st := f.style()
	server := func(indent string, compact bool) []byte {
		b, _ := marshal(entry, indent, st.unit, compact)
		return bytes.ReplaceAll(b, []byte("\n"), []byte(st.newline))
	}
	if f.blank {
		var b bytes.Buffer
		b.WriteString("{" + st.newline + st.unit)
		b.Write(quote(MapMCPServers))
		b.WriteString(": ")
		b.Write(f.objectValue(st, st.unit, false, name, server))
		b.WriteString(st.newline + "}" + st.newline)
		return b.Bytes(), nil
	}
	if f.mapName == "" {
		return f.insert(st, f.top, MapMCPServers, func(indent string, compact bool) []byte {
			return f.objectValue(st, indent, compact, name, server)
		}), nil
	}
	return f.insert(st, f.servers, name, server), nil
}

// Remove returns the content without server name: every member of that
// name in the server map goes, with the separator before it (after it,
// for the first member). Removing the last server leaves an empty map,
// {}. Error: ErrNotFound.
func (f *File) Remove(name string) ([]byte, error) {
	if _, ok := f.Entry(name); !ok {
		return nil, fmt.Errorf("%q: %w", name, ErrNotFound)
	}
	data, o := f.data, f.servers
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.members[i].name != name {
			continue
		}
		var cut span
		switch {
		case len(o.members) == 1:
			cut = span{o.open + 1, o.close}
		case i == 0:
			cut = span{o.members[0].key.start, o.members[1].key.start}
		default:
			cut = span{o.members[i-1].value.end, o.members[i].value.end}
		}
		data = splice(data, cut, nil)
		o = parseObject(data, o.open) // offsets before the cut are unchanged
	}
	return data, nil
}

// style is how the file writes JSON.
type style struct {
	unit    string // one level of indentation
	newline string // "\n" or "\r\n"
	compact bool   // the top-level object is on one line
}

// style finds the file's indentation unit (from the first server entry,
// else the first top-level member; two spaces when neither tells), its
// line ending, and whether it is written on one line.
func (f *File) style() style {
	st := style{unit: "  ", newline: "\n"}
	if f.blank {
		return st
	}
	if bytes.Contains(f.data, []byte("\r\n")) {
		st.newline = "\r\n"
	}
	st.compact = !bytes.ContainsAny(f.data[f.top.open:f.top.close], "\n")
	for _, o := range []object{f.servers, f.top} {
		if len(o.members) == 0 {
			continue
		}
		lead := f.data[o.open+1 : o.members[0].key.start]
		nl := bytes.LastIndexByte(lead, '\n')
		if nl < 0 {
			continue
		}
		inner, outer := string(lead[nl+1:]), lineIndent(f.data, o.open)
		if len(inner) > len(outer) && inner[:len(outer)] == outer {
			st.unit = inner[len(outer):]
			break
		}
	}
	return st
}

// objectValue is an object holding one member, name: value, to be
// written where a member's value starts at indentation indent.
func (f *File) objectValue(st style, indent string, compact bool, name string, value func(indent string, compact bool) []byte) []byte {
	var b bytes.Buffer
	if compact {
		b.WriteByte('{')
		b.Write(quote(name))
		b.WriteByte(':')
		b.Write(value("", true))
		b.WriteByte('}')
		return b.Bytes()
	}
	inner := indent + st.unit
	b.WriteString("{" + st.newline + inner)
	b.Write(quote(name))
	b.WriteString(": ")
	b.Write(value(inner, false))
	b.WriteString(st.newline + indent + "}")
	return b.Bytes()
}

// insert returns the content with member name: value added at the end
// of object o, copying the separators of o's last members.
func (f *File) insert(st style, o object, name string, value func(indent string, compact bool) []byte) []byte {
	var b bytes.Buffer
	n := len(o.members)
	if n == 0 {
		if st.compact {
			b.Write(quote(name))
			b.WriteByte(':')
			b.Write(value("", true))
		} else {
			outer := lineIndent(f.data, o.open)
			inner := outer + st.unit
			b.WriteString(st.newline + inner)
			b.Write(quote(name))
			b.WriteString(": ")
			b.Write(value(inner, false))
			b.WriteString(st.newline + outer)
		}
		return splice(f.data, span{o.open + 1, o.close}, b.Bytes())
	}
	last := o.members[n-1]
	sep := append([]byte{','}, f.data[o.open+1:last.key.start]...)
	if n > 1 {
		sep = f.data[o.members[n-2].value.end:last.key.start]
	}
	colon := f.data[last.key.end:last.value.start]
	if bytes.ContainsAny(colon, "\n") {
		colon = []byte(": ")
	}
	compact, indent := true, ""
	if nl := bytes.LastIndexByte(sep, '\n'); nl >= 0 {
		compact, indent = false, string(sep[nl+1:])
	}
	b.Write(sep)
	b.Write(quote(name))
	b.Write(colon)
	b.Write(value(indent, compact))
	return splice(f.data, span{last.value.end, last.value.end}, b.Bytes())
}

// lineIndent is the white space that starts the line holding data[at].
func lineIndent(data []byte, at int) string {
	start := bytes.LastIndexByte(data[:at], '\n') + 1
	end := start
	for end < at && (data[end] == ' ' || data[end] == '\t') {
		end++
	}
	return string(data[start:end])
}

// splice returns data with the bytes of s replaced by with (a new slice).
func splice(data []byte, s span, with []byte) []byte {
	out := make([]byte, 0, len(data)-(s.end-s.start)+len(with))
	out = append(out, data[:s.start]...)
	out = append(out, with...)
	return append(out, data[s.end:]...)
}

// quote is s as a JSON string.
func quote(s string) []byte {
	b, _ := marshal(s, "", "", true)
	return b
}

// marshal encodes v without escaping <, > and & (URLs keep their query
// strings readable), indented with prefix and indent unless compact,
// without a final newline.
func marshal(v any, prefix, indent string, compact bool) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if !compact {
		enc.SetIndent(prefix, indent)
	}
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

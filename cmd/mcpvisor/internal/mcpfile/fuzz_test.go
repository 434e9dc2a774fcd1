package mcpfile

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// FuzzEdit: whatever file Parse accepts, Add gives valid JSON holding
// the old servers and the new one, with the old entries as written, and
// Remove of the new one gives the file back (byte for byte when the map
// had servers before).
func FuzzEdit(f *testing.F) {
	for _, seed := range []string{
		`{"mcpServers":{"a":{"command":"a"}}}`,
		"{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"a\"}\n  }\n}\n",
		"{\r\n\t\"servers\": {\r\n\t\t\"a\": {}\r\n\t}\r\n}",
		`{"x": [1, {"y": "}"}], "mcpServers": {"\"q\"": {"args": ["{", "\\"]}}}`,
		`{}`, ``, `{"mcpServers":{}}`, ` { "other" : { } } `,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		const name = "fuzz-new"
		if _, ok := file.Entry(name); ok {
			return
		}
		added, err := file.Add(name, map[string]any{"type": "stdio", "command": "c", "args": []string{"<&>", "\n"}})
		if err != nil {
			t.Fatalf("Add: %v", err)
		}
		if !json.Valid(added) {
			t.Fatalf("Add made invalid JSON from %q: %q", data, added)
		}
		after, err := Parse(added)
		if err != nil {
			t.Fatalf("Parse after Add: %v", err)
		}
		if want := append(file.Names(), name); !slices.Equal(after.Names(), want) {
			t.Fatalf("servers after Add: %q, want %q", after.Names(), want)
		}
		for _, n := range file.Names() {
			before, _ := file.Entry(n)
			now, _ := after.Entry(n)
			if !bytes.Equal(before, now) {
				t.Fatalf("entry %q changed: %q → %q", n, before, now)
			}
		}
		removed, err := after.Remove(name)
		if err != nil {
			t.Fatalf("Remove: %v", err)
		}
		if len(file.Names()) > 0 && !bytes.Equal(removed, data) {
			t.Fatalf("Remove did not undo Add:\n%q\n%q", data, removed)
		}
	})
}

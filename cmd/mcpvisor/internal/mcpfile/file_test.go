package mcpfile

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/config"
)

type entry struct {
	Type    string            `json:"type"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

var stdioEntry = entry{Type: "stdio", Command: "npx", Args: []string{"-y", "srv"}}

// loads checks that mcpvisor's loader reads data and finds the servers
// named, and returns what it found.
func loads(t *testing.T, data []byte, names ...string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcp.json")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	cfg, err := config.LoadFiles(path)
	require.NoError(t, err, "the loader reads the result:\n%s", data)
	for _, n := range names {
		assert.Contains(t, cfg.Servers, n)
	}
	assert.Len(t, cfg.Servers, len(names))
	return cfg
}

// Adding writes the entry after the last server in the file's own style
// and changes no other byte; removing it gives back the file exactly.
func TestAddKeepsTheRestAndRemoveUndoes(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
		servers          []string
	}{
		{
			name: "two-space indent, unknown members at the top and inside an entry",
			file: `{
  "$schema": "https://example.com/schema.json",
  "mcpServers": {
    "a": {"command": "a", "x-team": {"owner": "me"},   "args": ["1"]},
    "b": {
      "url": "https://b.example/mcp?x=1&y=2",
      "unknown": [1, 2.50, 3e2]
    }
  },
  "other": {"keep": "as is"}
}
`,
			want: `{
  "$schema": "https://example.com/schema.json",
  "mcpServers": {
    "a": {"command": "a", "x-team": {"owner": "me"},   "args": ["1"]},
    "b": {
      "url": "https://b.example/mcp?x=1&y=2",
      "unknown": [1, 2.50, 3e2]
    },
    "new": {
      "type": "stdio",
      "command": "npx",
      "args": [
        "-y",
        "srv"
      ]
    }
  },
  "other": {"keep": "as is"}
}
`,
			servers: []string{"a", "b", "new"},
		},
		{
			name:    "tabs and CRLF line endings",
			file:    "{\r\n\t\"mcpServers\": {\r\n\t\t\"a\": {\"command\": \"a\"}\r\n\t}\r\n}\r\n",
			want:    "{\r\n\t\"mcpServers\": {\r\n\t\t\"a\": {\"command\": \"a\"},\r\n\t\t\"new\": {\r\n\t\t\t\"type\": \"stdio\",\r\n\t\t\t\"command\": \"npx\",\r\n\t\t\t\"args\": [\r\n\t\t\t\t\"-y\",\r\n\t\t\t\t\"srv\"\r\n\t\t\t]\r\n\t\t}\r\n\t}\r\n}\r\n",
			servers: []string{"a", "new"},
		},
		{
			name:    "one line",
			file:    `{"mcpServers":{"a":{"command":"a"},"b":{"command":"b"}},"z":null}`,
			want:    `{"mcpServers":{"a":{"command":"a"},"b":{"command":"b"},"new":{"type":"stdio","command":"npx","args":["-y","srv"]}},"z":null}`,
			servers: []string{"a", "b", "new"},
		},
		{
			name:    "one line with spaces",
			file:    `{ "mcpServers": { "a": { "command": "a" } } }`,
			want:    `{ "mcpServers": { "a": { "command": "a" }, "new": {"type":"stdio","command":"npx","args":["-y","srv"]} } }`,
			servers: []string{"a", "new"},
		},
		{
			name:    "VS Code's servers map",
			file:    "{\n    \"servers\": {\n        \"a\": {\"type\": \"stdio\", \"command\": \"a\"}\n    },\n    \"inputs\": []\n}",
			want:    "{\n    \"servers\": {\n        \"a\": {\"type\": \"stdio\", \"command\": \"a\"},\n        \"new\": {\n            \"type\": \"stdio\",\n            \"command\": \"npx\",\n            \"args\": [\n                \"-y\",\n                \"srv\"\n            ]\n        }\n    },\n    \"inputs\": []\n}",
			servers: []string{"a", "new"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.file))
			require.NoError(t, err)
			got, err := f.Add("new", stdioEntry)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
			loads(t, got, tc.servers...)

			g, err := Parse(got)
			require.NoError(t, err)
			raw, ok := g.Entry("new")
			require.True(t, ok)
			var back entry
			require.NoError(t, json.Unmarshal(raw, &back))
			assert.Equal(t, stdioEntry, back)
			undone, err := g.Remove("new")
			require.NoError(t, err)
			assert.Equal(t, tc.file, string(undone), "removing the added entry gives back the file, byte for byte")
		})
	}
}

// A file without a server map gets "mcpServers"; an empty map gets its
// first member on lines of its own; an empty file becomes a new one.
func TestAddWhereThereIsNoServer(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"no server map", "{\n  \"other\": true\n}\n",
			"{\n  \"other\": true,\n  \"mcpServers\": {\n    \"new\": {\n      \"type\": \"http\",\n      \"url\": \"https://x.example/mcp?a=1&b=2\"\n    }\n  }\n}\n"},
		{"no server map, one line", `{"other":true}`,
			`{"other":true,"mcpServers":{"new":{"type":"http","url":"https://x.example/mcp?a=1&b=2"}}}`},
		{"an empty object", "{}", `{"mcpServers":{"new":{"type":"http","url":"https://x.example/mcp?a=1&b=2"}}}`},
		{"an empty map", "{\n  \"mcpServers\": {}\n}\n",
			"{\n  \"mcpServers\": {\n    \"new\": {\n      \"type\": \"http\",\n      \"url\": \"https://x.example/mcp?a=1&b=2\"\n    }\n  }\n}\n"},
		{"an empty file", "",
			"{\n  \"mcpServers\": {\n    \"new\": {\n      \"type\": \"http\",\n      \"url\": \"https://x.example/mcp?a=1&b=2\"\n    }\n  }\n}\n"},
		{"white space only", " \n",
			"{\n  \"mcpServers\": {\n    \"new\": {\n      \"type\": \"http\",\n      \"url\": \"https://x.example/mcp?a=1&b=2\"\n    }\n  }\n}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.file))
			require.NoError(t, err)
			got, err := f.Add("new", entry{Type: "http", URL: "https://x.example/mcp?a=1&b=2"})
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
			loads(t, got, "new")
		})
	}
}

func TestRemove(t *testing.T) {
	const file = `{
  "mcpServers": {
    "a": {"command": "a"},
    "b": {"command": "b"},
    "c": {"command": "c"}
  }
}`
	for _, tc := range []struct{ name, file, remove, want string }{
		{"the first", file, "a", "{\n  \"mcpServers\": {\n    \"b\": {\"command\": \"b\"},\n    \"c\": {\"command\": \"c\"}\n  }\n}"},
		{"a middle one", file, "b", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"a\"},\n    \"c\": {\"command\": \"c\"}\n  }\n}"},
		{"the last", file, "c", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"a\"},\n    \"b\": {\"command\": \"b\"}\n  }\n}"},
		{"the only one", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"a\"}\n  },\n  \"x\": 1\n}", "a", "{\n  \"mcpServers\": {},\n  \"x\": 1\n}"},
		{"every copy of a repeated name", `{"mcpServers":{"a":{"command":"1"},"b":{"command":"b"},"a":{"command":"2"}}}`, "a", `{"mcpServers":{"b":{"command":"b"}}}`},
		{"a name written with escapes", `{"mcpServers":{"a":{"command":"a"},"\u0062":{"command":"b"}}}`, "b", `{"mcpServers":{"a":{"command":"a"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.file))
			require.NoError(t, err)
			got, err := f.Remove(tc.remove)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
			assert.True(t, json.Valid(got))
		})
	}
}

func TestErrors(t *testing.T) {
	f, err := Parse([]byte(`{"mcpServers":{"a":{"command":"a"}}}`))
	require.NoError(t, err)
	_, err = f.Add("a", stdioEntry)
	assert.ErrorIs(t, err, ErrExists)
	_, err = f.Remove("b")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = (&File{}).Remove("b")
	assert.ErrorIs(t, err, ErrNotFound, "the zero File is an empty file")
	_, err = f.Add("b", func() {})
	assert.Error(t, err, "an entry that does not marshal")

	_, err = Parse([]byte("{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"a\",}\n  }\n}"))
	var syn *SyntaxError
	require.ErrorAs(t, err, &syn)
	assert.Equal(t, 3, syn.Line)
	assert.Equal(t, 26, syn.Column, "the stray }")
	assert.Contains(t, err.Error(), "invalid JSON at line 3, column 26")
	_, err = Parse([]byte(`[1]`))
	assert.ErrorIs(t, err, ErrNotObject)
	assert.Contains(t, err.Error(), "an array")
	_, err = Parse([]byte(`null`))
	assert.ErrorIs(t, err, ErrNotObject)
	_, err = Parse([]byte(`{"mcpServers":{},"servers":{}}`))
	assert.ErrorIs(t, err, ErrBothMaps)
	_, err = Parse([]byte(`{"mcpServers":null}`))
	assert.ErrorIs(t, err, ErrMapNotObject)
	assert.Contains(t, err.Error(), `"mcpServers" is null`)
}

func TestNamesAndEntry(t *testing.T) {
	f, err := Parse([]byte(`{"mcpServers":{"b":{"command":"1"},"a":{"command":"a"},"b":{"command":"2"}}}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "a"}, f.Names())
	raw, ok := f.Entry("b")
	require.True(t, ok)
	assert.JSONEq(t, `{"command":"2"}`, string(raw), "the last copy, as the loader takes it")
	assert.Equal(t, MapMCPServers, f.MapName())

	f, err = Parse([]byte(`{"other":1}`))
	require.NoError(t, err)
	assert.Empty(t, f.Names())
	assert.Empty(t, f.MapName())
	_, ok = f.Entry("b")
	assert.False(t, ok)
}

func TestReplaceStrings(t *testing.T) {
	raw := []byte(`{"command": "x", "env": {"A": "secret", "B": "${B}"}, "args": ["secret"], "oauth": {"clientSecret": "s", "n": 1}}`)
	got := ReplaceStrings(raw, func(path []string, v string) (string, bool) {
		p := strings.Join(path, ".")
		if (strings.HasPrefix(p, "env.") && v != "${B}") || p == "oauth.clientSecret" {
			return "<redacted>", true
		}
		return "", false
	})
	assert.Equal(t, `{"command": "x", "env": {"A": "<redacted>", "B": "${B}"}, "args": ["secret"], "oauth": {"clientSecret": "<redacted>", "n": 1}}`, string(got))
	assert.Equal(t, "not json", string(ReplaceStrings([]byte("not json"), nil)))
	assert.Equal(t, "[1]", string(ReplaceStrings([]byte("[1]"), nil)))
}

func TestReplace(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir()) // macOS's temporary directory is under a link
	require.NoError(t, err)
	path := filepath.Join(dir, ".mcp.json")

	// A new file gets perm; an existing one keeps its mode.
	require.NoError(t, Replace(path, nil, []byte("{}\n"), 0o600))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.NoError(t, os.Chmod(path, 0o640))
	require.NoError(t, Replace(path, []byte("{}\n"), []byte(`{"a":1}`), 0o600))
	fi, err = os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, `{"a":1}`, string(b))

	// Someone wrote it after it was read: nothing is written.
	err = Replace(path, []byte("{}\n"), []byte(`{"b":2}`), 0o600)
	assert.ErrorIs(t, err, ErrChanged)
	err = Replace(filepath.Join(dir, "gone.json"), []byte("{}"), []byte(`{}`), 0o600)
	assert.ErrorIs(t, err, ErrChanged, "it was removed")
	err = Replace(path, nil, []byte(`{}`), 0o600)
	assert.ErrorIs(t, err, ErrChanged, "it was created")
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, `{"a":1}`, string(b))

	// No temporary file is left behind.
	left, err := filepath.Glob(filepath.Join(dir, ".*.tmp"))
	require.NoError(t, err)
	assert.Empty(t, left)

	// A linked config file stays linked: its target is written.
	real := filepath.Join(dir, "dotfiles.json")
	require.NoError(t, os.WriteFile(real, []byte(`{}`), 0o644))
	link := filepath.Join(t.TempDir(), ".mcp.json")
	require.NoError(t, os.Symlink(real, link))
	target, err := Target(link)
	require.NoError(t, err)
	assert.Equal(t, real, target)
	require.NoError(t, Replace(target, []byte(`{}`), []byte(`{"x":1}`), 0o600))
	fi, err = os.Lstat(link)
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeSymlink)
	b, err = os.ReadFile(link)
	require.NoError(t, err)
	assert.Equal(t, `{"x":1}`, string(b))

	dangling := filepath.Join(t.TempDir(), ".mcp.json")
	require.NoError(t, os.Symlink(filepath.Join(dir, "nothing"), dangling))
	_, err = Target(dangling)
	assert.Error(t, err)
	target, err = Target(filepath.Join(dir, "new.json"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "new.json"), target)
	data, err := Read(target)
	require.NoError(t, err)
	assert.Nil(t, data)
	assert.False(t, errors.Is(err, os.ErrNotExist))
}

func TestSyntaxErrorAtTheEnd(t *testing.T) {
	_, err := Parse([]byte("{\"mcpServers\": {\n  \"a\": {}\n"))
	var syn *SyntaxError
	require.ErrorAs(t, err, &syn)
	assert.Equal(t, [2]int{3, 1}, [2]int{syn.Line, syn.Column}, "where the file ends")
}

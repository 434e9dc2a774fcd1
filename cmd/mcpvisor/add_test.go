package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// addEnv is a user with their own home and state directory, in a project
// directory: what add, remove and get work on.
type addEnv struct {
	home, project, state string
	env                  []string
}

func newAddEnv(t *testing.T) *addEnv {
	t.Helper()
	if _, err := os.Stat("/etc/mcpvisor/managed-mcp.json"); err == nil {
		t.Skip("a managed config file exists on this machine and would win")
	}
	e := &addEnv{home: realTempDir(t), project: realTempDir(t), state: realTempDir(t)}
	e.env = []string{"HOME=" + e.home, envStateDir + "=" + e.state}
	return e
}

// realTempDir is a temporary directory named without symbolic links
// (macOS's lives under one), as the files add writes are reported.
func realTempDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return dir
}

func (e *addEnv) run(t *testing.T, args ...string) result {
	t.Helper()
	return cliIn(t, e.project, e.env, args...)
}

func (e *addEnv) userFile() string    { return filepath.Join(e.home, ".mcp.json") }
func (e *addEnv) projectFile() string { return filepath.Join(e.project, ".mcp.json") }
func (e *addEnv) localFile() string   { return filepath.Join(e.project, ".mcp.local.json") }

// entries reads the server map of a config file.
func entries(t *testing.T, path string) map[string]map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var f struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	require.NoError(t, json.Unmarshal(b, &f), "%s: %s", path, b)
	return f.MCPServers
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

func stateOfServer(t *testing.T, out listOut, name string) string {
	t.Helper()
	for _, s := range out.Servers {
		if s.Name == name {
			return s.State
		}
	}
	t.Fatalf("no server %q in list output %+v", name, out.Servers)
	return ""
}

// Each scope writes the file the loader reads for it, with the entry
// claude would write; the servers then load as that layer's.
func TestAddWritesTheScopeFiles(t *testing.T) {
	t.Parallel()
	e := newAddEnv(t)

	r := e.run(t, "add", "--scope", "user", "-e", "A=1", "-e", "B=x=y", "u", "--", binPath, "mock", "-tools", "1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `Added stdio MCP server "u" with command: `+binPath+" mock -tools 1 to the user config")
	assert.Contains(t, r.stdout, "File modified: "+e.userFile())
	assert.NotContains(t, r.stdout, "approve", "the user layer is trusted")
	assert.Equal(t, map[string]any{"type": "stdio", "command": binPath, "args": []any{"mock", "-tools", "1"},
		"env": map[string]any{"A": "1", "B": "x=y"}}, entries(t, e.userFile())["u"])
	assert.Equal(t, os.FileMode(0o600), mode(t, e.userFile()))

	// The default scope is local, as with claude.
	r = e.run(t, "add", "p", binPath, "mock")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "to the local config")
	assert.Contains(t, r.stdout, "File modified: "+e.localFile())
	assert.Contains(t, r.stdout, `mcpvisor holds "p" until you approve it`)
	assert.Contains(t, r.stdout, "run 'mcpvisor trust p', or add it with --approve")
	assert.Equal(t, map[string]any{"type": "stdio", "command": binPath, "args": []any{"mock"}}, entries(t, e.localFile())["p"])
	assert.Equal(t, os.FileMode(0o600), mode(t, e.localFile()))

	r = e.run(t, "add", "-s", "project", "-t", "http", "-H", "Authorization: Bearer tok", "-H", "X-Team:  a b ",
		"web", "https://h.example/mcp?a=1&b=2")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `Added HTTP MCP server "web" with URL: https://h.example/mcp?a=1&b=2 to the project config`)
	r = e.run(t, "add", "--scope=project", "--transport=sse", "s", "https://h.example/sse")
	require.Equal(t, 0, r.code, r.stderr)
	r = e.run(t, "add", "--scope", "project", "--transport", "ws", "w", "wss://h.example/ws")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, map[string]map[string]any{
		"web": {"type": "http", "url": "https://h.example/mcp?a=1&b=2", "headers": map[string]any{"Authorization": "Bearer tok", "X-Team": "a b"}},
		"s":   {"type": "sse", "url": "https://h.example/sse"},
		"w":   {"type": "ws", "url": "wss://h.example/ws"},
	}, entries(t, e.projectFile()))
	b, err := os.ReadFile(e.projectFile())
	require.NoError(t, err)
	assert.Contains(t, string(b), `"https://h.example/mcp?a=1&b=2"`, "written readably")
	assert.Equal(t, os.FileMode(0o644), mode(t, e.projectFile()), "a project's .mcp.json is meant to be shared")

	// The loader reads them as the layers they are: the user's server
	// runs, the project's wait for approval (and are contacted by nothing).
	r = e.run(t, "list", "--json", "--timeout", "20s")
	out := decodeList(t, r.stdout)
	assert.Equal(t, "ready", stateOfServer(t, out, "u"))
	for _, n := range []string{"p", "web", "s", "w"} {
		assert.Equal(t, "needs-approval", stateOfServer(t, out, n), n)
	}
}

// --approve records the approval as trust does: the server runs. Without
// it, trust approves it later.
func TestAddApprove(t *testing.T) {
	t.Parallel()
	e := newAddEnv(t)
	r := e.run(t, "add", "--scope", "project", "--approve", "p", "--", binPath, "mock")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `Approved "p" for `)
	assert.FileExists(t, filepath.Join(e.state, "approvals.json"))
	r = e.run(t, "trust", "--list")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Nothing waits for approval.")

	r = e.run(t, "add", "q", "--", binPath, "mock")
	require.Equal(t, 0, r.code, r.stderr)
	r = e.run(t, "list", "--json", "--timeout", "20s")
	out := decodeList(t, r.stdout)
	assert.Equal(t, "ready", stateOfServer(t, out, "p"))
	assert.Equal(t, "needs-approval", stateOfServer(t, out, "q"))
	r = e.run(t, "get", "q")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Status: needs-approval: \"local\" layer entry ("+e.localFile()+") is not approved (run 'mcpvisor trust q')")
	r = e.run(t, "trust", "--yes", "q")
	require.Equal(t, 0, r.code, r.stderr)
	r = e.run(t, "list", "--json", "--timeout", "20s")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "ready", stateOfServer(t, decodeList(t, r.stdout), "q"))
	r = e.run(t, "get", "q", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"status": "enabled"`)

	r = e.run(t, "add", "--scope", "user", "--approve", "u", "--", binPath, "mock")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Nothing to approve: the user config is trusted.")
	// --trust-project records nothing: add refuses it.
	r = e.run(t, "add", "--trust-project", "z", "--", binPath, "mock")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "add --approve records the approval")
}

// Bad input is a usage error and writes nothing; a name the scope has is
// a failure and changes nothing.
func TestAddErrors(t *testing.T) {
	t.Parallel()
	e := newAddEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"add"}, "add needs NAME and COMMAND_OR_URL"},
		{[]string{"add", "x"}, "add needs NAME and COMMAND_OR_URL"},
		{[]string{"add", "--scope", "global", "x", "--", "c"}, `--scope "global": want user, project or local`},
		{[]string{"add", "--transport", "grpc", "x", "c"}, `--transport "grpc": want stdio, http, sse or ws`},
		{[]string{"add", "-e", "NOEQUALS", "x", "--", "c"}, `-e "NOEQUALS": want KEY=VALUE`},
		{[]string{"add", "-e", "=v", "x", "--", "c"}, `-e "=v": want KEY=VALUE`},
		{[]string{"add", "-e", "A=1", "-e", "A=2", "x", "--", "c"}, "-e A given twice"},
		{[]string{"add", "-t", "http", "-H", "NoColon", "x", "https://h.example"}, `-H "NoColon": want "Name: value"`},
		{[]string{"add", "-t", "http", "-H", "Bad Name: v", "x", "https://h.example"}, `"Bad Name" is not a header name`},
		{[]string{"add", "-t", "http", "-H", "a: 1", "-H", "A: 2", "x", "https://h.example"}, "-H A given twice"},
		{[]string{"add", "my server", "--", "c"}, `invalid name "my server"`},
		{[]string{"add", "@scope/pkg", "--", "c"}, `invalid name "@scope/pkg"`},
		{[]string{"add", "-t", "http", "x", "https://h.example", "--", "extra"}, `--transport http takes a URL and no arguments, got ["extra"]`},
		{[]string{"add", "-t", "sse", "-e", "A=1", "x", "https://h.example"}, "-e sets the environment of a stdio server"},
		{[]string{"add", "-H", "A: 1", "x", "--", "c"}, "-H sets a header of a remote server"},
		{[]string{"add", "-t", "http", "x", "ftp://h.example"}, `"ftp://h.example" is not a http URL`},
		{[]string{"add", "-t", "http", "x", "/relative"}, `"/relative" is not a http URL`},
		{[]string{"add", "x", "npx", "-y", "pkg"}, "unknown shorthand flag: 'y' in -y (put the server's command and its arguments after --"},
		{[]string{"add", "x", "--", ""}, "the command must not be empty"},
		{[]string{"--config", "a.json", "add", "--scope", "user", "x", "--", "c"}, "--scope picks one of the standard layer files"},
		{[]string{"--config", "a.json", "--config", "b.json", "add", "x", "--", "c"}, "2 --config files: name the one file to write"},
	} {
		r := e.run(t, tc.args...)
		assert.Equal(t, 2, r.code, "%q: a usage error; stderr: %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, tc.want, "%q", tc.args)
	}
	for _, dir := range []string{e.home, e.project} {
		files, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, files, "nothing is written on a usage error")
	}

	// A name the file has: exit 1, the file unchanged.
	r := e.run(t, "add", "-s", "project", "x", "--", "c", "1")
	require.Equal(t, 0, r.code, r.stderr)
	before, err := os.ReadFile(e.projectFile())
	require.NoError(t, err)
	r = e.run(t, "add", "-s", "project", "x", "--", "c", "2")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `MCP server "x" already exists in the project config (`+e.projectFile()+`): remove it first (mcpvisor remove x --scope project)`)
	after, err := os.ReadFile(e.projectFile())
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after))
	// Another scope may have the same name: the higher one wins.
	r = e.run(t, "add", "x", "--", "c", "3")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "It takes precedence over the entry of the project config ("+e.projectFile()+").")
	r = e.run(t, "add", "-s", "user", "x", "--", "c", "4")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Note: overridden: the local entry ("+e.localFile()+") is used instead.")

	// A file that is not valid JSON is never overwritten.
	broken := "{\"mcpServers\": {\n  \"a\": {\"command\": \"a\"},\n"
	require.NoError(t, os.WriteFile(e.userFile(), []byte(broken), 0o600))
	r = e.run(t, "add", "-s", "user", "y", "--", "c")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, e.userFile()+": invalid JSON at line 3, column 1")
	b, err := os.ReadFile(e.userFile())
	require.NoError(t, err)
	assert.Equal(t, broken, string(b))

	// A URL without --transport is added as a command, with a warning, as
	// claude does.
	r = e.run(t, "add", "-s", "project", "url", "https://h.example/mcp")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "this looks like a URL, but no --transport was given")
	assert.Equal(t, "https://h.example/mcp", entries(t, e.projectFile())["url"]["command"])
}

// The file is edited in place: every other byte stays, the mode too, and
// a linked file stays linked; removing the entry gives the file back.
func TestAddAndRemoveKeepTheFile(t *testing.T) {
	t.Parallel()
	e := newAddEnv(t)
	original := `{
    "$schema": "https://example.com/mcp.schema.json",
    "mcpServers": {
        "keep": {"command": "keep",   "x-owner": {"team": "infra", "n": 1.50}},
        "other": {
            "url": "https://o.example/mcp?a=1&b=2",
            "headers": {"X-Unknown": "kept"}
        }
    },
    "x-editor": ["settings", {"tabs": true}]
}
`
	require.NoError(t, os.WriteFile(e.projectFile(), []byte(original), 0o640))
	r := e.run(t, "add", "-s", "project", "new", "--", "cmd", "a")
	require.Equal(t, 0, r.code, r.stderr)
	b, err := os.ReadFile(e.projectFile())
	require.NoError(t, err)
	want := strings.Replace(original, `"headers": {"X-Unknown": "kept"}
        }
`, `"headers": {"X-Unknown": "kept"}
        },
        "new": {
            "type": "stdio",
            "command": "cmd",
            "args": [
                "a"
            ]
        }
`, 1)
	assert.Equal(t, want, string(b))
	assert.Equal(t, os.FileMode(0o640), mode(t, e.projectFile()), "the file keeps its mode")

	r = e.run(t, "remove", "new")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `Removed MCP server "new" from the project config`)
	b, err = os.ReadFile(e.projectFile())
	require.NoError(t, err)
	assert.Equal(t, original, string(b), "byte for byte")
	left, err := filepath.Glob(filepath.Join(e.project, ".*.tmp"))
	require.NoError(t, err)
	assert.Empty(t, left, "no temporary file is left")

	// ~/.mcp.json linked from a dotfiles directory stays a link.
	dotfiles := filepath.Join(realTempDir(t), "mcp.json")
	require.NoError(t, os.WriteFile(dotfiles, []byte(`{"mcpServers": {}}`), 0o600))
	require.NoError(t, os.Symlink(dotfiles, e.userFile()))
	r = e.run(t, "add", "-s", "user", "u", "--", "cmd")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "File modified: "+dotfiles)
	fi, err := os.Lstat(e.userFile())
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeSymlink, "still a link")
	assert.Contains(t, entries(t, dotfiles), "u")

	// With --config, that file is the one written.
	cfg := filepath.Join(t.TempDir(), "my.json")
	r = e.run(t, "--config", cfg, "add", "c", "--", binPath, "mock")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "to the file config")
	r = e.run(t, "--config", cfg, "list", "--json", "--timeout", "20s")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "ready", stateOfServer(t, decodeList(t, r.stdout), "c"), "a --config file is trusted")
	r = e.run(t, "--config", cfg, "remove", "c")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, entries(t, cfg))
}

// remove without --scope removes the one definition there is, refuses
// when several scopes have the name, and names the scopes.
func TestRemove(t *testing.T) {
	t.Parallel()
	e := newAddEnv(t)
	for _, args := range [][]string{
		{"add", "-s", "user", "dup", "--", "c", "u"},
		{"add", "-s", "local", "dup", "--", "c", "l"},
		{"add", "-s", "user", "only", "--", "c"},
	} {
		r := e.run(t, args...)
		require.Equal(t, 0, r.code, r.stderr)
	}
	userBefore, err := os.ReadFile(e.userFile())
	require.NoError(t, err)
	localBefore, err := os.ReadFile(e.localFile())
	require.NoError(t, err)

	r := e.run(t, "remove", "dup")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `MCP server "dup" is defined in several scopes:`)
	assert.Contains(t, r.stderr, "user     "+e.userFile())
	assert.Contains(t, r.stderr, "local    "+e.localFile())
	assert.Contains(t, r.stderr, "nothing was removed; remove it from one with: mcpvisor remove dup --scope SCOPE")
	b, _ := os.ReadFile(e.userFile())
	assert.Equal(t, string(userBefore), string(b))
	b, _ = os.ReadFile(e.localFile())
	assert.Equal(t, string(localBefore), string(b))

	r = e.run(t, "remove", "--scope", "project", "dup")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `no MCP server named "dup" in the project config (`+e.projectFile()+`); it is defined in:`)
	r = e.run(t, "remove", "-s", "local", "dup")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `Removed MCP server "dup" from the local config`)
	assert.Contains(t, r.stdout, "It is still defined in the user config ("+e.userFile()+").")
	r = e.run(t, "remove", "dup")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "from the user config")
	assert.Equal(t, []string{"only"}, keys(entries(t, e.userFile())))

	r = e.run(t, "remove", "dup")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `no MCP server named "dup" in:`)
	r = e.run(t, "remove")
	assert.Equal(t, 2, r.code)
	r = e.run(t, "remove", "-s", "everywhere", "only")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `--scope "everywhere": want user, project or local`)
}

// get shows the entry used, its scope, file and status, and the entries
// it overrides, with secrets redacted unless asked.
func TestGet(t *testing.T) {
	t.Parallel()
	e := newAddEnv(t)
	user := `{"mcpServers": {
  "s": {"command": "low"},
  "off": {"command": "c", "disabled": true},
  "secret": {
    "type": "http",
    "url": "https://me:hunter2@h.example/mcp",
    "headers": {"Authorization": "Bearer sk-live-1", "X-Ref": "${API_KEY}", "X-Default": "${K:-sk-default}"},
    "oauth": {"clientId": "id", "clientSecret": "cs-1", "workload": {"token": "wl-1"}},
    "x-note": "kept"
  }
}}`
	require.NoError(t, os.WriteFile(e.userFile(), []byte(user), 0o600))
	withKey := append(slices.Clip(e.env), "API_KEY=k")
	get := func(args ...string) result { return cliIn(t, e.project, withKey, append([]string{"get"}, args...)...) }
	r := e.run(t, "add", "s", "--", "high", "-e", "x")
	require.Equal(t, 0, r.code, r.stderr)

	r = get("s")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, `s:
  Scope: local
  File: `+e.localFile()+`
  Status: needs-approval: "local" layer entry (`+e.localFile()+`) is not approved (run 'mcpvisor trust s')
  Entry:
    {
      "type": "stdio",
      "command": "high",
      "args": [
        "-e",
        "x"
      ]
    }
  Overrides: the entry of the user config (`+e.userFile()+`)

To remove this server, run: mcpvisor remove s --scope local
`, r.stdout)

	r = get("off", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	assert.ElementsMatch(t, []string{"name", "scope", "file", "status", "reason", "entry", "overrides"}, keys(got))
	assert.JSONEq(t, `{"name": "off", "scope": "user", "file": "`+e.userFile()+`", "status": "disabled", "reason": "",
		"entry": {"command": "c", "disabled": true}, "overrides": []}`, r.stdout)

	r = get("secret")
	require.Equal(t, 0, r.code, r.stderr)
	for _, s := range []string{"hunter2", "sk-live-1", "cs-1", "wl-1", "sk-default"} {
		assert.NotContains(t, r.stdout, s)
	}
	for _, s := range []string{`"url": "https://me:xxxxx@h.example/mcp"`, `"Authorization": "<redacted>"`, `"X-Ref": "${API_KEY}"`,
		`"X-Default": "<redacted>"`, `"clientSecret": "<redacted>"`, `"token": "<redacted>"`, `"clientId": "id"`, `"x-note": "kept"`} {
		assert.Contains(t, r.stdout, s)
	}
	assert.Contains(t, r.stdout, "Status: enabled\n")
	r = e.run(t, "get", "secret") // without $API_KEY
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Status: invalid: ${API_KEY}: environment variable is not set")
	r = get("secret", "--show-secrets", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	for _, s := range []string{"hunter2", "sk-live-1", "cs-1", "wl-1", "sk-default"} {
		assert.Contains(t, r.stdout, s)
	}
	assert.Contains(t, r.stdout, `"status": "enabled"`)

	r = e.run(t, "get", "nope")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `no MCP server named "nope" in:`)
	assert.Contains(t, r.stderr, e.userFile())
	r = e.run(t, "get")
	assert.Equal(t, 2, r.code)
}

// Concurrent adds to one file all land: the edit lock serializes them.
func TestAddConcurrent(t *testing.T) {
	t.Parallel()
	e := newAddEnv(t)
	const n = 12
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, n)
	outs := make([][]byte, n)
	for i := range n {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, binPath, "add", "-s", "user", "s"+strconv.Itoa(i), "--", "c")
			cmd.Dir, cmd.Env = e.project, cliEnv(e.env...)
			cmd.WaitDelay = time.Second
			outs[i], errs[i] = cmd.CombinedOutput()
		})
	}
	testwait.Call(t, fmt.Sprintf("the %d concurrent adds", n), wg.Wait)
	require.NoError(t, ctx.Err(), "the adds did not finish in time")
	for i := range n {
		assert.NoError(t, errs[i], "add %d: %s", i, outs[i])
	}
	assert.Len(t, entries(t, e.userFile()), n)
}

// A project's config file that is a symbolic link (committed, pointing at
// the user's own ~/.mcp.json, say) is not written through: add fails with
// a clear error and the file it points to is unchanged. The user's own
// files may be links.
func TestAddDoesNotWriteThroughAProjectLink(t *testing.T) {
	t.Parallel()
	e := newAddEnv(t)
	const mine = `{"mcpServers": {"mine": {"command": "x"}}}`
	require.NoError(t, os.WriteFile(e.userFile(), []byte(mine), 0o600))
	for _, scope := range []string{"local", "project"} {
		link := e.localFile()
		if scope == "project" {
			link = e.projectFile()
		}
		require.NoError(t, os.Symlink(e.userFile(), link))
		r := e.run(t, "add", "--scope", scope, "evil", "--", "sh", "-c", "touch /tmp/x")
		assert.Equal(t, 1, r.code, r.stdout)
		assert.Contains(t, r.stderr, link+": is a symbolic link in the project directory")
		got, err := os.ReadFile(e.userFile())
		require.NoError(t, err)
		assert.Equal(t, mine, string(got), "the file the link points to is unchanged")
		r = e.run(t, "remove", "--scope", scope, "mine")
		assert.Equal(t, 1, r.code, r.stdout)
		require.NoError(t, os.Remove(link))
	}

	// The user's own file, linked from elsewhere, is still written where
	// it points.
	dotfiles := filepath.Join(realTempDir(t), "mcp.json")
	require.NoError(t, os.Rename(e.userFile(), dotfiles))
	require.NoError(t, os.Symlink(dotfiles, e.userFile()))
	r := e.run(t, "add", "--scope", "user", "ok", "--", "sh")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, entries(t, dotfiles), "ok")
}

package config

import (
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
)

// fakeEnv is an injectable environment for Options.LookupEnv.
func fakeEnv(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// noManaged is a managed-file path that does not exist, so that tests do
// not depend on the machine's /etc/mcpvisor.
func mustAbs(t *testing.T, path string) string {
	abs, err := filepath.Abs(path)
	require.NoError(t, err)
	return abs
}

func noManaged(t *testing.T) string {
	return filepath.Join(t.TempDir(), "no-managed-mcp.json")
}

// writeFile writes content to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func stdio(command string, args ...string) mcpvisor.ServerConfig {
	return mcpvisor.ServerConfig{Config: transports.Config{Command: command, Args: args}}
}

func TestLoadConfigShapes(t *testing.T) {
	tests := []struct {
		name string
		file string
		env  map[string]string
		want map[string]mcpvisor.ServerConfig
	}{
		{
			name: "Claude Desktop mcpServers",
			file: "testdata/config/claude_desktop.json",
			env:  map[string]string{"HOME": "/home/ada", "GITHUB_TOKEN": "ghp_secret"},
			want: map[string]mcpvisor.ServerConfig{
				"filesystem": stdio("npx", "-y", "@modelcontextprotocol/server-filesystem", "/home/ada/Desktop", "/tmp/downloads"),
				"github": {Config: transports.Config{
					Command: "docker",
					Args:    []string{"run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"},
					Env:     map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret"},
				}},
			},
		},
		{
			name: "VS Code servers with stdio, http and sse types",
			file: "testdata/config/vscode.json",
			env:  map[string]string{"PROJECT_DIR": "/src/app", "API_KEY": "k123", "PORT": ""},
			want: map[string]mcpvisor.ServerConfig{
				"memory": {Config: transports.Config{
					Type: transports.TypeStdio, Command: "npx",
					Args: []string{"-y", "@modelcontextprotocol/server-memory"},
					Cwd:  "/src/app",
					Env:  map[string]string{"MEMORY_FILE_PATH": "/tmp/memory.json"},
				}, EnvFile: mustAbs(t, "testdata/config/vscode.env")},
				"remote": {Config: transports.Config{
					Type: transports.TypeHTTP, URL: "https://mcp.example.com/mcp",
					Headers: map[string]string{"Authorization": "Bearer k123"},
				}},
				"legacy": {Config: transports.Config{Type: transports.TypeSSE, URL: "http://localhost:8080/sse"}},
			},
		},
		{
			name: "unknown members ignored, null means absent, names case-sensitive",
			file: "testdata/config/unknown_members.json",
			want: map[string]mcpvisor.ServerConfig{
				"future": {
					Config: transports.Config{Command: "future-server"},
					Trust:  "trusted",
					Tools:  mcpvisor.ToolFilter{Allow: []string{"read_*"}},
					OAuth:  []byte(`{"clientId": "abc", "scopes": ["repo"]}`),
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(Options{Files: []string{tt.file}, LookupEnv: fakeEnv(tt.env)})
			require.NoError(t, err)
			for name, sc := range tt.want {
				sc.Scope = LayerFile // the layer of a file named to the loader
				tt.want[name] = sc
			}
			assert.Equal(t, tt.want, cfg.Servers)
			assert.Equal(t, []string{tt.file}, cfg.Files)
			for name := range tt.want {
				assert.Equal(t, tt.file, cfg.Sources[name], name)
			}
			assert.Len(t, cfg.Sources, len(tt.want))
		})
	}
}

func TestLoadConfigFilesLaterFileWins(t *testing.T) {
	cfg, err := LoadFiles("testdata/config/base.json", "testdata/config/override.json")
	require.NoError(t, err)

	// beta is replaced whole: nothing of base.json's entry survives.
	gamma := stdio("gamma-server")
	gamma.Scope = LayerFile
	assert.Equal(t, map[string]mcpvisor.ServerConfig{
		"alpha": {Config: transports.Config{Command: "alpha-server", Args: []string{"--verbose"}, Env: map[string]string{"LEVEL": "debug"}}, Lazy: true, Scope: LayerFile},
		"beta":  {Config: transports.Config{Type: transports.TypeHTTP, URL: "https://beta.example.com/mcp"}, Scope: LayerFile},
		"gamma": gamma,
	}, cfg.Servers)
	assert.Equal(t, map[string]string{
		"alpha": "testdata/config/base.json",
		"beta":  "testdata/config/override.json",
		"gamma": "testdata/config/override.json",
	}, cfg.Sources)
	assert.Equal(t, []string{"testdata/config/base.json", "testdata/config/override.json"}, cfg.Files)

	// The other order: base.json wins.
	cfg, err = LoadFiles("testdata/config/override.json", "testdata/config/base.json")
	require.NoError(t, err)
	assert.Equal(t, "beta-server", cfg.Servers["beta"].Command)
	assert.Equal(t, 5000, cfg.Servers["beta"].TimeoutMs)
	assert.Equal(t, "testdata/config/base.json", cfg.Sources["beta"])
}

func TestLoadConfigFilesUsesProcessEnvironment(t *testing.T) {
	t.Setenv("MCPVISOR_TEST_TOKEN", "from-env")
	dir := t.TempDir()
	f := writeFile(t, dir, ".mcp.json", `{"mcpServers": {"s": {"command": "x", "env": {"T": "${MCPVISOR_TEST_TOKEN}"}}}}`)
	cfg, err := LoadFiles(f)
	require.NoError(t, err)
	assert.Equal(t, "from-env", cfg.Servers["s"].Env["T"])
}

func TestLoadConfigFilesEmpty(t *testing.T) {
	cfg, err := LoadFiles()
	require.NoError(t, err)
	assert.NotNil(t, cfg.Servers)
	assert.NotNil(t, cfg.Sources)
	assert.Empty(t, cfg.Servers)
	assert.Empty(t, cfg.Files)

	f := writeFile(t, t.TempDir(), "mcp.json", `{"servers": {}}`)
	cfg, err = LoadFiles(f)
	require.NoError(t, err)
	assert.Empty(t, cfg.Servers)
	assert.Equal(t, []string{f}, cfg.Files)
}

func TestConfigErrorMessage(t *testing.T) {
	_, err := LoadFiles("testdata/config/bad_args.json")
	require.Error(t, err)
	assert.EqualError(t, err, "testdata/config/bad_args.json: mcpServers.github.args[2]: want string, got number")

	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "testdata/config/bad_args.json", ce.File)
	assert.Equal(t, "mcpServers.github.args[2]", ce.Path)
	assert.EqualError(t, ce.Unwrap(), "want string, got number")

	// A whole-file problem has no path.
	assert.EqualError(t, &Error{File: "a.json", Err: errors.New("boom")}, "a.json: boom")
}

func TestLoadConfigErrors(t *testing.T) {
	env := map[string]string{"SET": "v", "EMPTY": ""}
	tests := []struct {
		name     string
		content  string
		wantPath string
		wantErr  string // substring of the Error's Err
		wantIs   error  // optional errors.Is target
	}{
		// File shape.
		{name: "neither mcpServers nor servers", content: `{"mcp": {"servers": {}}}`,
			wantErr: `no "mcpServers" or "servers" member`},
		{name: "both mcpServers and servers", content: `{"mcpServers": {}, "servers": {}}`,
			wantErr: `has both "mcpServers" and "servers"`},
		{name: "syntax error with line and column", content: "{\n  \"mcpServers\": {,}\n}",
			wantErr: "invalid JSON at line 2, column 18"},
		{name: "trailing comma is not JSON", content: `{"mcpServers": {"a": {"command": "x"},}}`,
			wantErr: "invalid JSON at line 1"},
		{name: "empty file", content: ``, wantErr: "invalid JSON"},
		{name: "top level array", content: `[{"mcpServers": {}}]`,
			wantErr: `want a JSON object with "mcpServers" or "servers", got array`},
		{name: "top level null", content: `null`,
			wantErr: `want a JSON object with "mcpServers" or "servers", got null`},
		{name: "mcpServers not an object", content: `{"mcpServers": ["a"]}`,
			wantPath: "mcpServers", wantErr: "want object, got array"},
		{name: "servers null", content: `{"servers": null}`,
			wantPath: "servers", wantErr: "want object, got null"},
		{name: "entry not an object", content: `{"mcpServers": {"a": "npx foo"}}`,
			wantPath: "mcpServers.a", wantErr: "want object, got string"},
		{name: "entry null", content: `{"servers": {"a": null}}`,
			wantPath: "servers.a", wantErr: "want object, got null"},

		// Wrong JSON types, with paths.
		{name: "command number", content: `{"mcpServers": {"a": {"command": 1}}}`,
			wantPath: "mcpServers.a.command", wantErr: "want string, got number"},
		{name: "args string", content: `{"mcpServers": {"a": {"command": "x", "args": "--flag"}}}`,
			wantPath: "mcpServers.a.args", wantErr: "want array, got string"},
		{name: "args element object", content: `{"mcpServers": {"a": {"command": "x", "args": ["a", "b", {}]}}}`,
			wantPath: "mcpServers.a.args[2]", wantErr: "want string, got object"},
		{name: "args element null", content: `{"mcpServers": {"a": {"command": "x", "args": ["a", null]}}}`,
			wantPath: "mcpServers.a.args[1]", wantErr: "want string, got null"},
		{name: "env value number", content: `{"mcpServers": {"a": {"command": "x", "env": {"PORT": 8080}}}}`,
			wantPath: "mcpServers.a.env.PORT", wantErr: "want string, got number"},
		{name: "env array", content: `{"mcpServers": {"a": {"command": "x", "env": ["A=b"]}}}`,
			wantPath: "mcpServers.a.env", wantErr: "want object, got array"},
		{name: "header value boolean", content: `{"servers": {"a": {"url": "http://h", "headers": {"X-Debug": true}}}}`,
			wantPath: "servers.a.headers.X-Debug", wantErr: "want string, got boolean"},
		{name: "timeoutMs string", content: `{"mcpServers": {"a": {"command": "x", "timeoutMs": "5000"}}}`,
			wantPath: "mcpServers.a.timeoutMs", wantErr: "want integer, got string"},
		{name: "timeoutMs fraction", content: `{"mcpServers": {"a": {"command": "x", "timeoutMs": 1.5}}}`,
			wantPath: "mcpServers.a.timeoutMs", wantErr: "want integer, got 1.5"},
		{name: "disabled string", content: `{"mcpServers": {"a": {"command": "x", "disabled": "yes"}}}`,
			wantPath: "mcpServers.a.disabled", wantErr: "want boolean, got string"},
		{name: "type number", content: `{"servers": {"a": {"type": 1, "command": "x"}}}`,
			wantPath: "servers.a.type", wantErr: "want string, got number"},
		{name: "tools allow element", content: `{"mcpServers": {"a": {"command": "x", "tools": {"allow": [1]}}}}`,
			wantPath: "mcpServers.a.tools.allow[0]", wantErr: "want string, got number"},
		{name: "tools array", content: `{"mcpServers": {"a": {"command": "x", "tools": ["read"]}}}`,
			wantPath: "mcpServers.a.tools", wantErr: "want object, got array"},
		{name: "name needing quotes", content: `{"mcpServers": {"my.server v2": {"command": false}}}`,
			wantPath: `mcpServers["my.server v2"].command`, wantErr: "want string, got boolean"},
		{name: "env key needing quotes", content: `{"mcpServers": {"a": {"command": "x", "env": {"A.B": 1}}}}`,
			wantPath: `mcpServers.a.env["A.B"]`, wantErr: "want string, got number"},

		// Names and validation.
		{name: "empty server name", content: `{"mcpServers": {"": {"command": "x"}}}`,
			wantPath: `mcpServers[""]`, wantErr: "server name must not be empty"},
		{name: "no command or url", content: `{"mcpServers": {"a": {"args": ["x"]}}}`,
			wantPath: "mcpServers.a", wantErr: `server needs "command" (stdio) or "url" (remote)`},
		{name: "http without url", content: `{"servers": {"a": {"type": "http", "command": "x"}}}`,
			wantPath: "servers.a", wantErr: `http server needs "url"`},
		{name: "unknown type", content: `{"servers": {"a": {"type": "grpc", "url": "http://h"}}}`,
			wantPath: "servers.a", wantErr: `unknown transport type "grpc"`},
		{name: "negative timeout", content: `{"mcpServers": {"a": {"command": "x", "timeoutMs": -1}}}`,
			wantPath: "mcpServers.a", wantErr: "timeoutMs must not be negative"},
		{name: "unsupported protocol version", content: `{"mcpServers": {"a": {"command": "x", "protocolVersion": "1999-01-01"}}}`,
			wantPath: "mcpServers.a", wantErr: `protocolVersion "1999-01-01"`},
		{name: "validated after expansion", content: `{"mcpServers": {"a": {"type": "stdio", "command": "${EMPTY}"}}}`,
			wantPath: "mcpServers.a", wantErr: `stdio server needs "command"`},

		// Expansion, with paths.
		{name: "unset variable in args", content: `{"mcpServers": {"a": {"command": "x", "args": ["--t", "${NOPE}"]}}}`,
			wantPath: "mcpServers.a.args[1]", wantErr: "${NOPE}: environment variable is not set", wantIs: ErrUnsetVariable},
		{name: "unset variable in command", content: `{"mcpServers": {"a": {"command": "${NOPE}/bin/x"}}}`,
			wantPath: "mcpServers.a.command", wantErr: "${NOPE}", wantIs: ErrUnsetVariable},
		{name: "unset variable in env", content: `{"mcpServers": {"a": {"command": "x", "env": {"TOKEN": "${GH_TOKEN}"}}}}`,
			wantPath: "mcpServers.a.env.TOKEN", wantErr: "${GH_TOKEN}", wantIs: ErrUnsetVariable},
		{name: "unset variable in cwd", content: `{"mcpServers": {"a": {"command": "x", "cwd": "${WORK}"}}}`,
			wantPath: "mcpServers.a.cwd", wantErr: "${WORK}", wantIs: ErrUnsetVariable},
		{name: "unset variable in url", content: `{"servers": {"a": {"url": "https://${HOST}/mcp"}}}`,
			wantPath: "servers.a.url", wantErr: "${HOST}", wantIs: ErrUnsetVariable},
		{name: "unset variable in header", content: `{"servers": {"a": {"url": "http://h", "headers": {"Authorization": "Bearer ${KEY}"}}}}`,
			wantPath: "servers.a.headers.Authorization", wantErr: "${KEY}", wantIs: ErrUnsetVariable},
		{name: "malformed reference in url", content: `{"servers": {"a": {"url": "http://${A-b}"}}}`,
			wantPath: "servers.a.url", wantErr: `malformed reference "${A-b}"`},
		{name: "nested reference in header", content: `{"servers": {"a": {"url": "http://h", "headers": {"X": "${A:-${B}}"}}}}`,
			wantPath: "servers.a.headers.X", wantErr: "nested reference"},
		{name: "VS Code input variable", content: `{"servers": {"a": {"url": "http://h", "headers": {"X": "${input:api-key}"}}}}`,
			wantPath: "servers.a.headers.X", wantErr: "${input:api-key}: VS Code input variables are not supported; set the value in env or the file",
			wantIs: ErrInputVariable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := writeFile(t, t.TempDir(), ".mcp.json", tt.content)
			cfg, err := Load(Options{Files: []string{file}, LookupEnv: fakeEnv(env)})
			require.Error(t, err)
			assert.Nil(t, cfg)

			var ce *Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, file, ce.File)
			assert.Equal(t, tt.wantPath, ce.Path)
			assert.Contains(t, ce.Err.Error(), tt.wantErr)
			if tt.wantIs != nil {
				assert.ErrorIs(t, err, tt.wantIs)
			}
			// The message leads with file and path.
			prefix := file + ": "
			if tt.wantPath != "" {
				prefix += tt.wantPath + ": "
			}
			assert.Contains(t, err.Error(), prefix+tt.wantErr)
		})
	}
}

func TestLoadConfigErrorsAreCollected(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.json", `{"mcpServers": {
		"ok":  {"command": "x"},
		"bad1": {"command": 1},
		"bad2": {"command": "x", "args": [true]}
	}}`)
	b := writeFile(t, dir, "b.json", `{"servers": {"bad3": {"url": "${NOPE}"}}}`)
	missing := filepath.Join(dir, "missing.json")

	cfg, err := Load(Options{Files: []string{a, missing, b}, LookupEnv: fakeEnv(nil)})
	require.Error(t, err)
	assert.Nil(t, cfg)
	msg := err.Error()
	assert.Contains(t, msg, a+": mcpServers.bad1.command: want string, got number")
	assert.Contains(t, msg, a+": mcpServers.bad2.args[0]: want string, got boolean")
	assert.Contains(t, msg, missing+": ")
	assert.Contains(t, msg, b+": servers.bad3.url: ${NOPE}")
	assert.ErrorIs(t, err, fs.ErrNotExist, "an explicitly named file must exist")
	assert.ErrorIs(t, err, ErrUnsetVariable)
	assert.NotContains(t, msg, "mcpServers.ok")

	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "mcpServers.bad1.command", ce.Path, "errors.As finds the first, in file then name order")
}

func TestLoadConfigExpansionScope(t *testing.T) {
	// Keys and members other than command, args, env values, cwd, url and
	// header values are never expanded.
	file := writeFile(t, t.TempDir(), ".mcp.json", `{"mcpServers": {
		"${NAME}": {
			"command": "${BIN}",
			"env": {"${KEY}": "${VAL}"},
			"tools": {"allow": ["${TOOL}"]},
			"headers": {"${H}": "$HOME $${VAL}"}
		}
	}}`)
	env := fakeEnv(map[string]string{"NAME": "n", "BIN": "bin", "KEY": "k", "VAL": "val", "TOOL": "x", "H": "h"})
	cfg, err := Load(Options{Files: []string{file}, LookupEnv: env})
	require.NoError(t, err)
	require.Contains(t, cfg.Servers, "${NAME}")
	sc := cfg.Servers["${NAME}"]
	assert.Equal(t, "bin", sc.Command)
	assert.Equal(t, map[string]string{"${KEY}": "val"}, sc.Env)
	assert.Equal(t, []string{"${TOOL}"}, sc.Tools.Allow)
	assert.Equal(t, map[string]string{"${H}": "$HOME $val"}, sc.Headers)
}

func TestExpand(t *testing.T) {
	env := fakeEnv(map[string]string{
		"A":     "alpha",
		"B":     "beta",
		"EMPTY": "",
		"URL":   "https://set.example.com",
	})
	tests := []struct {
		in      string
		want    string
		wantErr string // substring; empty means success
		wantIs  error
	}{
		{in: "", want: ""},
		{in: "plain text", want: "plain text"},
		{in: "${A}", want: "alpha"},
		{in: "x${A}y", want: "xalphay"},
		{in: "${A}${B}", want: "alphabeta"},
		{in: "${A}-${B}/${A}", want: "alpha-beta/alpha"},
		{in: "${EMPTY}", want: ""},
		{in: "$A and $HOME", want: "$A and $HOME"},
		{in: "$", want: "$"},
		{in: "$$", want: "$$"},
		{in: "$${A}", want: "$alpha"},
		{in: "cost: 5$ {A}", want: "cost: 5$ {A}"},
		{in: "{A} } $}", want: "{A} } $}"},
		{in: "${A}}", want: "alpha}"},
		{in: "${A:-fallback}", want: "alpha"},
		{in: "${UNSET:-fallback}", want: "fallback"},
		{in: "${EMPTY:-fallback}", want: "fallback"},
		{in: "${UNSET:-}", want: ""},
		{in: "${EMPTY:-}", want: ""},
		{in: "${UNSET:-http://localhost:8080/mcp}", want: "http://localhost:8080/mcp"},
		{in: "${URL:-http://localhost:8080/mcp}", want: "https://set.example.com"},
		{in: "${UNSET:-a:-b}", want: "a:-b"},
		{in: "${UNSET:--x}", want: "-x"},
		{in: "${UNSET:-$HOME}", want: "$HOME"},
		{in: "${UNSET:-a b {c}", want: "a b {c"},
		{in: "${UNSET:-x}${A}${UNSET2:-y}", want: "xalphay"},
		{in: "${_private1}", wantErr: "${_private1}", wantIs: ErrUnsetVariable},

		{in: "${UNSET}", wantErr: "${UNSET}: environment variable is not set", wantIs: ErrUnsetVariable},
		{in: "ok ${A} then ${UNSET}", wantErr: "${UNSET}", wantIs: ErrUnsetVariable},
		{in: "${", wantErr: `unterminated "${"`},
		{in: "abc ${A", wantErr: `unterminated "${"`},
		{in: "${}", wantErr: "empty variable name"},
		{in: "${:-x}", wantErr: "empty variable name"},
		{in: "${A-b}", wantErr: `malformed reference "${A-b}"`},
		{in: "${A:=b}", wantErr: `unsupported reference "${A:=b}"`},
		{in: "${A:?b}", wantErr: `unsupported reference "${A:?b}"`},
		{in: "${env:HOME}", wantErr: `unsupported reference "${env:HOME}": write ${HOME}`},
		{in: "${input:token}", wantErr: "${input:token}: VS Code input variables", wantIs: ErrInputVariable},
		{in: "${input:}", wantErr: "${input:}: VS Code input variables", wantIs: ErrInputVariable},
		{in: "${1A}", wantErr: `malformed reference "${1A}"`},
		{in: "${ A }", wantErr: `malformed reference "${ A }"`},
		{in: "${A.B}", wantErr: `malformed reference "${A.B}"`},
		{in: "${A:-${B}}", wantErr: "nested reference in the default of ${A}"},
		{in: "${UNSET:-${B:-c}}", wantErr: "nested reference"},
		{in: "${${A}}", wantErr: `malformed reference "${${A}"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := expand(tt.in, env)
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			if tt.wantIs != nil {
				assert.ErrorIs(t, err, tt.wantIs)
			}
		})
	}
}

func TestExpandErrorDoesNotEchoValue(t *testing.T) {
	_, err := expand("Bearer sk-live-secret ${", fakeEnv(nil))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "sk-live-secret")
	_, err = expand("Bearer sk-live-secret ${UNSET}", fakeEnv(nil))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "sk-live-secret")
}

func TestLoadConfigLayers(t *testing.T) {
	const (
		home    = "testdata/config/layers/home"
		project = "testdata/config/layers/project"
		managed = "testdata/config/layers/managed/managed-mcp.json"
	)
	var (
		userFile    = filepath.Join(home, ".mcp.json")
		projectFile = filepath.Join(project, ".mcp.json")
		localFile   = filepath.Join(project, ".mcp.local.json")
	)
	empty := t.TempDir()
	absent := noManaged(t)
	env := fakeEnv(map[string]string{"TEAM": "infra"})

	tests := []struct {
		name        string
		opts        Options
		wantFiles   []string
		wantCommand map[string]string // server → command (or url for remote servers)
		wantSources map[string]string
	}{
		{
			name:      "user, project and local, lowest first",
			opts:      Options{Approvals: approveAll{}, Home: home, Dir: project, ManagedFile: absent},
			wantFiles: []string{userFile, projectFile, localFile},
			wantCommand: map[string]string{
				"shared":       "from-local",
				"home-only":    "home-server",
				"project-only": "https://project.example.com/mcp",
			},
			wantSources: map[string]string{"shared": localFile, "home-only": userFile, "project-only": projectFile},
		},
		{
			name:        "missing user layer skipped",
			opts:        Options{Approvals: approveAll{}, Home: empty, Dir: project, ManagedFile: absent},
			wantFiles:   []string{projectFile, localFile},
			wantCommand: map[string]string{"shared": "from-local", "project-only": "https://project.example.com/mcp"},
			wantSources: map[string]string{"shared": localFile, "project-only": projectFile},
		},
		{
			name:        "missing project and local layers skipped",
			opts:        Options{Approvals: approveAll{}, Home: home, Dir: empty, ManagedFile: absent},
			wantFiles:   []string{userFile},
			wantCommand: map[string]string{"shared": "from-home", "home-only": "home-server"},
			wantSources: map[string]string{"shared": userFile, "home-only": userFile},
		},
		{
			name:        "no files at all",
			opts:        Options{Approvals: approveAll{}, Home: empty, Dir: empty, ManagedFile: absent},
			wantFiles:   nil,
			wantCommand: map[string]string{},
			wantSources: map[string]string{},
		},
		{
			name:        "home equal to dir loads the file once",
			opts:        Options{Approvals: approveAll{}, Home: home, Dir: home + "/", ManagedFile: absent},
			wantFiles:   []string{userFile},
			wantCommand: map[string]string{"shared": "from-home", "home-only": "home-server"},
			wantSources: map[string]string{"shared": userFile, "home-only": userFile},
		},
		{
			name:        "managed file is exclusive",
			opts:        Options{Approvals: approveAll{}, Home: home, Dir: project, ManagedFile: managed},
			wantFiles:   []string{managed},
			wantCommand: map[string]string{"policy": "https://mcp.corp.example.com/infra"},
			wantSources: map[string]string{"policy": managed},
		},
		{
			name:        "explicit files bypass layers and the managed file",
			opts:        Options{Files: []string{localFile, userFile}, Home: home, Dir: project, ManagedFile: managed},
			wantFiles:   []string{localFile, userFile},
			wantCommand: map[string]string{"shared": "from-home", "home-only": "home-server"},
			wantSources: map[string]string{"shared": userFile, "home-only": userFile},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.LookupEnv = env
			cfg, err := Load(opts)
			require.NoError(t, err)
			assert.Equal(t, tt.wantFiles, cfg.Files)
			got := map[string]string{}
			for name, sc := range cfg.Servers {
				got[name] = sc.Command + sc.URL
			}
			assert.Equal(t, tt.wantCommand, got)
			assert.Equal(t, tt.wantSources, cfg.Sources)
		})
	}
}

func TestLoadConfigLayerUsesLookupEnv(t *testing.T) {
	const project = "testdata/config/layers/project"
	cfg, err := Load(Options{Approvals: approveAll{},
		Home: t.TempDir(), Dir: project, ManagedFile: noManaged(t),
		LookupEnv: fakeEnv(map[string]string{"LOCAL_TOKEN": "tok"}),
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"--token", "tok"}, cfg.Servers["shared"].Args)
}

func TestLoadConfigLayerErrors(t *testing.T) {
	t.Run("broken layer is skipped and reported, the others load", func(t *testing.T) {
		home, dir := t.TempDir(), t.TempDir()
		writeFile(t, home, ".mcp.json", `{"mcpServers": {"mine": {"command": "m"}}}`)
		project := writeFile(t, dir, ".mcp.json", `{"mcpServers": {"p": {"command": "p"}}}`)
		local := writeFile(t, dir, ".mcp.local.json", `{"mcpServers": {"a": {"command": ["x"]}, "b": {"command": "b"}}}`)
		cfg, err := Load(Options{Approvals: approveAll{}, Home: home, Dir: dir, ManagedFile: noManaged(t)})
		require.NoError(t, err)
		assert.Equal(t, []string{"mine", "p"}, slices.Sorted(maps.Keys(cfg.Servers)),
			"the broken file's good entry b is left out with it")
		assert.Equal(t, []string{filepath.Join(home, ".mcp.json"), project}, cfg.Files)
		require.Len(t, cfg.Skipped, 1)
		sk := cfg.Skipped[0]
		assert.Equal(t, LayerLocal, sk.Layer)
		assert.Equal(t, local, sk.File)
		require.Len(t, sk.Errors, 1)
		assert.Equal(t, "mcpServers.a.command", sk.Errors[0].Path)
		var ce *Error
		require.ErrorAs(t, sk.Err(), &ce)
		assert.Equal(t, local, ce.File)
		assert.Contains(t, sk.Err().Error(), local)
	})
	t.Run("project file that is not JSON leaves the user layer", func(t *testing.T) {
		home, dir := t.TempDir(), t.TempDir()
		writeFile(t, home, ".mcp.json", `{"mcpServers": {"mine": {"command": "m"}}}`)
		project := writeFile(t, dir, ".mcp.json", `{"mcpServers": {`)
		cfg, err := Load(Options{Home: home, Dir: dir, ManagedFile: noManaged(t)})
		require.NoError(t, err)
		assert.Equal(t, []string{"mine"}, slices.Sorted(maps.Keys(cfg.Servers)))
		require.Len(t, cfg.Skipped, 1)
		assert.Equal(t, LayerProject, cfg.Skipped[0].Layer)
		assert.Equal(t, project, cfg.Skipped[0].File)
	})
	t.Run("broken host layer is skipped", func(t *testing.T) {
		dir := t.TempDir()
		good := writeFile(t, dir, "good.json", `{"mcpServers": {"g": {"command": "g"}}}`)
		bad := writeFile(t, dir, "bad.json", `[]`)
		cfg, err := Load(Options{Dir: dir, ManagedFile: noManaged(t), Layers: []Layer{
			{Name: "host", File: good, Trusted: true}, {Name: "extra", File: bad, Trusted: true}}})
		require.NoError(t, err)
		assert.Equal(t, []string{"g"}, slices.Sorted(maps.Keys(cfg.Servers)))
		require.Len(t, cfg.Skipped, 1)
		assert.Equal(t, SkippedLayer{Layer: "extra", File: bad, Errors: cfg.Skipped[0].Errors}, cfg.Skipped[0])
	})
	t.Run("broken named file still fails the load", func(t *testing.T) {
		dir := t.TempDir()
		good := writeFile(t, dir, "good.json", `{"mcpServers": {"g": {"command": "g"}}}`)
		bad := writeFile(t, dir, "bad.json", `{"mcpServers": {`)
		_, err := Load(Options{Files: []string{good, bad}, ManagedFile: noManaged(t)})
		var ce *Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, bad, ce.File)
	})
	t.Run("broken managed file fails the load", func(t *testing.T) {
		managed := writeFile(t, t.TempDir(), "managed-mcp.json", `{"servers": {"a": {}}}`)
		_, err := Load(Options{Approvals: approveAll{}, Home: t.TempDir(), Dir: t.TempDir(), ManagedFile: managed})
		var ce *Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, managed, ce.File)
		assert.Equal(t, "servers.a", ce.Path)
	})
	t.Run("unreadable managed file is not ignored", func(t *testing.T) {
		managed := t.TempDir() // a directory: it exists but cannot be read as a file
		_, err := Load(Options{Approvals: approveAll{}, Home: t.TempDir(), Dir: t.TempDir(), ManagedFile: managed})
		var ce *Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, managed, ce.File)
	})
	t.Run("unreadable layer is skipped and reported", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(dir, ".mcp.json"), 0o700))
		cfg, err := Load(Options{Approvals: approveAll{}, Home: t.TempDir(), Dir: dir, ManagedFile: noManaged(t)})
		require.NoError(t, err)
		require.Len(t, cfg.Skipped, 1)
		assert.Equal(t, filepath.Join(dir, ".mcp.json"), cfg.Skipped[0].File)
	})
}

func TestLoadConfigDefaultHomeAndDir(t *testing.T) {
	home := t.TempDir()
	dir := t.TempDir()
	writeFile(t, home, ".mcp.json", `{"mcpServers": {"user": {"command": "u"}}}`)
	writeFile(t, dir, ".mcp.json", `{"mcpServers": {"project": {"command": "${MCPVISOR_TEST_CMD}"}}}`)
	t.Setenv("HOME", home)
	t.Setenv("MCPVISOR_TEST_CMD", "p")
	t.Chdir(dir)

	cfg, err := Load(Options{Approvals: approveAll{}, ManagedFile: noManaged(t)})
	require.NoError(t, err)
	assert.Equal(t, "u", cfg.Servers["user"].Command)
	assert.Equal(t, "p", cfg.Servers["project"].Command, "nil LookupEnv reads the process environment")
	require.Len(t, cfg.Files, 2)
	assert.Equal(t, filepath.Join(home, ".mcp.json"), cfg.Files[0])
}

// TestLoadConfigDecodeValueTypes covers the decoder on member types that
// mcpvisor.ServerConfig does not use yet, so that a member added later decodes as
// encoding/json would.
func TestLoadConfigDecodeValueTypes(t *testing.T) {
	type inner struct {
		Name string `json:"name"`
	}
	type embedded struct {
		Shadowed string `json:"shadowed"`
		Deep     int    `json:"deep"`
	}
	type sample struct {
		embedded
		Shadowed string            `json:"shadowed"`
		Untagged float64           // named Untagged
		Skipped  string            `json:"-"`
		Ptr      *inner            `json:"ptr"`
		Inners   []inner           `json:"inners"`
		Bytes    []byte            `json:"bytes"`
		IntKeys  map[int]string    `json:"intKeys"`
		Any      any               `json:"any"`
		Small    uint8             `json:"small"`
		Nested   map[string][]bool `json:"nested"`
		hidden   string
	}
	tests := []struct {
		name     string
		json     string
		want     sample
		wantPath string
		wantErr  string
	}{
		{
			name: "all types",
			json: `{"shadowed": "outer", "deep": 3, "Untagged": 1.5, "-": "x", "Skipped": "x",
				"ptr": {"name": "p"}, "inners": [{"name": "a"}], "bytes": "aGk=", "intKeys": {"1": "one"},
				"any": [1, "two"], "small": 255, "nested": {"k": [true]}, "hidden": "x"}`,
			want: sample{
				embedded: embedded{Deep: 3}, Shadowed: "outer", Untagged: 1.5,
				Ptr: &inner{Name: "p"}, Inners: []inner{{Name: "a"}}, Bytes: []byte("hi"),
				IntKeys: map[int]string{1: "one"}, Any: []any{1.0, "two"}, Small: 255,
				Nested: map[string][]bool{"k": {true}},
			},
		},
		{name: "null pointer", json: `{"ptr": null}`, want: sample{}},
		{name: "float from string", json: `{"Untagged": "1"}`, wantPath: "Untagged", wantErr: "want number, got string"},
		{name: "integer overflow", json: `{"small": 256}`, wantPath: "small", wantErr: "want integer, got 256"},
		{name: "inside pointer", json: `{"ptr": {"name": 1}}`, wantPath: "ptr.name", wantErr: "want string, got number"},
		{name: "inside slice of structs", json: `{"inners": [{}, {"name": []}]}`, wantPath: "inners[1].name", wantErr: "want string, got array"},
		{name: "inside map of slices", json: `{"nested": {"k": [true, 0]}}`, wantPath: "nested.k[1]", wantErr: "want boolean, got number"},
		{name: "delegated to encoding/json", json: `{"bytes": 1}`, wantPath: "bytes", wantErr: "cannot unmarshal"},
		{name: "embedded member", json: `{"deep": "3"}`, wantPath: "deep", wantErr: "want integer, got string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got sample
			e := decodeValue(reflect.ValueOf(&got).Elem(), []byte(tt.json), "")
			if tt.wantErr == "" {
				require.Nil(t, e)
				assert.Equal(t, tt.want, got)
				return
			}
			require.NotNil(t, e)
			assert.Equal(t, tt.wantPath, e.Path)
			assert.Contains(t, e.Err.Error(), tt.wantErr)
		})
	}
}

func TestLoadConfigFilesMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.json")
	_, err := LoadFiles(missing)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.EqualError(t, err, missing+": no such file or directory")
}

func TestLoadConfigRemoteServerWithTLS(t *testing.T) {
	file := writeFile(t, t.TempDir(), ".mcp.json", `{"mcpServers": {
		"api": {
			"type": "http",
			"url": "https://${HOST}/mcp",
			"headers": {"Authorization": "Bearer ${TOKEN}"},
			"tls": {"caFile": "${CERTS}/ca.pem", "certFile": "${CERTS}/client.pem", "keyFile": "${CERTS}/client.key", "serverName": "mcp.internal"}
		}
	}}`)
	env := fakeEnv(map[string]string{"HOST": "mcp.example.com", "TOKEN": "t0k", "CERTS": "/etc/certs"})
	cfg, err := Load(Options{Files: []string{file}, LookupEnv: env})
	require.NoError(t, err)
	sc := cfg.Servers["api"]
	assert.Equal(t, "https://mcp.example.com/mcp", sc.URL)
	assert.Equal(t, "Bearer t0k", sc.Headers["Authorization"])
	require.NotNil(t, sc.TLS)
	assert.Equal(t, transports.TLSConfig{CAFile: "/etc/certs/ca.pem", CertFile: "/etc/certs/client.pem", KeyFile: "/etc/certs/client.key", ServerName: "mcp.internal"}, *sc.TLS)

	bad := writeFile(t, t.TempDir(), ".mcp.json", `{"mcpServers": {"api": {"url": "https://h", "tls": {"caFile": "${NOPE}"}}}}`)
	_, err = Load(Options{Files: []string{bad}, LookupEnv: env})
	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "mcpServers.api.tls.caFile", ce.Path)
	assert.ErrorIs(t, err, ErrUnsetVariable)
}

func remote(typ transports.Type, url string) mcpvisor.ServerConfig {
	return mcpvisor.ServerConfig{Config: transports.Config{Type: typ, URL: url}}
}

// allow makes an allow list; allow() is the empty one.
func allow(entries ...PolicyEntry) *[]PolicyEntry {
	if entries == nil {
		entries = []PolicyEntry{}
	}
	return &entries
}

// TestServerPolicyMatching specifies what one entry matches: each case puts
// the entry in a deny list and asks whether the server is denied.
func TestServerPolicyMatching(t *testing.T) {
	byName := func(p string) PolicyEntry { return PolicyEntry{ServerName: p} }
	exact := func(argv ...string) PolicyEntry { return PolicyEntry{ServerCommand: CommandPattern{Exact: argv}} }
	glob := func(p string) PolicyEntry { return PolicyEntry{ServerCommand: CommandPattern{Glob: p}} }
	byURL := func(p string) PolicyEntry { return PolicyEntry{ServerURL: p} }
	https := func(u string) mcpvisor.ServerConfig { return remote(transports.TypeHTTP, u) }
	sdk := mcpvisor.ServerConfig{Config: transports.Config{Type: transports.TypeSDK}}

	tests := []struct {
		name   string
		entry  PolicyEntry
		server string
		sc     mcpvisor.ServerConfig
		want   bool
	}{
		// serverName: path.Match on the name, whatever the transport.
		{"name exact", byName("github"), "github", stdio("x"), true},
		{"name is case-sensitive", byName("github"), "GitHub", stdio("x"), false},
		{"name is whole", byName("git"), "github", stdio("x"), false},
		{"name star", byName("git*"), "github", stdio("x"), true},
		{"name star matches empty", byName("github*"), "github", stdio("x"), true},
		{"name question mark", byName("gith?b"), "github", stdio("x"), true},
		{"name class", byName("[a-c]*"), "beta", stdio("x"), true},
		{"name star stops at slash", byName("corp*"), "corp/tools", stdio("x"), false},
		{"name matches a remote server", byName("docs"), "docs", https("https://h/"), true},
		{"name matches an in-process server", byName("inproc"), "inproc", sdk, true},

		// serverCommand as an array: command and args exactly.
		{"command exact", exact("npx", "-y", "pkg"), "s", stdio("npx", "-y", "pkg"), true},
		{"command exact, an arg missing", exact("npx", "-y", "pkg"), "s", stdio("npx", "pkg"), false},
		{"command exact, an arg more", exact("npx", "-y", "pkg"), "s", stdio("npx", "-y", "pkg", "--flag"), false},
		{"command exact, args reordered", exact("npx", "-y", "pkg"), "s", stdio("npx", "pkg", "-y"), false},
		{"command exact has no wildcards", exact("npx", "*"), "s", stdio("npx", "pkg"), false},
		{"command exact compares as written", exact("npx"), "s", stdio("/usr/bin/npx"), false},
		{"command exact, no args", exact("server"), "s", stdio("server"), true},
		{"command with explicit stdio type", exact("server"), "s", mcpvisor.ServerConfig{Config: transports.Config{Type: "STDIO", Command: "server"}}, true},

		// serverCommand as a string: '*' over the command line joined by spaces.
		{"command glob", glob("npx -y @corp/*"), "s", stdio("npx", "-y", "@corp/tools"), true},
		{"command glob crosses arguments", glob("npx -y @corp/*"), "s", stdio("npx", "-y", "@corp/tools", "--stdio"), true},
		{"command glob literal elsewhere", glob("npx -y @corp/*"), "s", stdio("npx", "--yes", "@corp/tools"), false},
		{"command glob anchored", glob("npx -y @corp/*"), "s", stdio("sudo", "npx", "-y", "@corp/tools"), false},
		{"command glob star anywhere", glob("* evil-pkg*"), "s", stdio("npx", "-y", "evil-pkg@latest"), true},
		{"command glob, ? is literal", glob("server?"), "s", stdio("servers"), false},
		{"command glob whole line", glob("python /opt/a.py"), "s", stdio("python", "/opt/a.py"), true},
		{"command never matches a remote server", glob("*"), "s", https("https://h/"), false},
		{"command never matches an in-process server", glob("*"), "s", sdk, false},

		// serverUrl: '*' within scheme, host, port or path-and-query.
		{"url exact", byURL("https://mcp.example.com/mcp"), "s", https("https://mcp.example.com/mcp"), true},
		{"url path differs", byURL("https://mcp.example.com/mcp"), "s", https("https://mcp.example.com/other"), false},
		{"url all paths", byURL("https://mcp.example.com/*"), "s", https("https://mcp.example.com/a/b/c"), true},
		{"url all paths includes root", byURL("https://mcp.example.com/*"), "s", https("https://mcp.example.com"), true},
		{"url no path means root", byURL("https://mcp.example.com"), "s", https("https://mcp.example.com/"), true},
		{"url root only", byURL("https://mcp.example.com"), "s", https("https://mcp.example.com/mcp"), false},
		{"url subdomain", byURL("https://*.example.com/*"), "s", https("https://a.b.example.com/mcp"), true},
		{"url subdomain needs the dot", byURL("https://*.example.com/*"), "s", https("https://example.com/mcp"), false},
		{"url star stays in the host", byURL("https://*.example.com/*"), "s", https("https://evil.com/.example.com/"), false},
		{"url suffix is not the host", byURL("https://*.example.com/*"), "s", https("https://a.example.com.evil.io/"), false},
		{"url userinfo is not the host", byURL("https://*.example.com/*"), "s", https("https://a.example.com@evil.com/"), false},
		{"url userinfo ignored", byURL("https://*.example.com/*"), "s", https("https://user:pw@a.example.com/mcp"), true},
		{"url host case-insensitive", byURL("https://MCP.Example.com/*"), "s", https("https://mcp.EXAMPLE.com/x"), true},
		{"url path case-sensitive", byURL("https://h/MCP"), "s", https("https://h/mcp"), false},
		{"url host trailing dot", byURL("https://*.evil.com/*"), "s", https("https://x.evil.com./mcp"), true},
		{"url scheme differs", byURL("https://h/*"), "s", remote(transports.TypeHTTP, "http://h/mcp"), false},
		{"url scheme wildcard", byURL("*://*.evil.com/*"), "s", remote(transports.TypeWS, "ws://a.evil.com/ws"), true},
		{"url scheme case-insensitive", byURL("https://h/*"), "s", https("HTTPS://h/mcp"), true},
		{"url default port", byURL("https://h/*"), "s", https("https://h:443/mcp"), true},
		{"url other port", byURL("https://h/*"), "s", https("https://h:8443/mcp"), false},
		{"url explicit port", byURL("https://h:8443/*"), "s", https("https://h:8443/mcp"), true},
		{"url explicit default port", byURL("https://h:443/*"), "s", https("https://h/mcp"), true},
		{"url any port", byURL("http://localhost:*/*"), "s", remote(transports.TypeSSE, "http://localhost:3000/sse"), true},
		{"url any port includes the default", byURL("http://localhost:*/*"), "s", remote(transports.TypeSSE, "http://localhost/sse"), true},
		{"url port wildcard", byURL("http://localhost:30*/*"), "s", https("http://localhost:3001/"), true},
		{"url ipv6", byURL("http://[::1]:*/*"), "s", https("http://[::1]:8080/mcp"), true},
		{"url query must be matched", byURL("https://h/mcp"), "s", https("https://h/mcp?tenant=a"), false},
		{"url query by wildcard", byURL("https://h/mcp*"), "s", https("https://h/mcp?tenant=a"), true},
		{"url query on root", byURL("https://h?x=1"), "s", https("https://h/?x=1"), true},
		{"url fragment ignored", byURL("https://h/mcp"), "s", https("https://h/mcp#frag"), true},
		{"url dot segments resolved", byURL("https://h/ok/*"), "s", https("https://h/ok/../admin"), false},
		{"url encoded dot segments resolved", byURL("https://h/ok/*"), "s", https("https://h/ok/%2e%2e/admin"), false},
		{"url path compared decoded", byURL("https://h/a b"), "s", https("https://h/a%20b"), true},
		{"url trailing slash kept", byURL("https://h/mcp/"), "s", https("https://h/mcp/"), true},
		{"url never matches a stdio server", byURL("*://*"), "s", stdio("npx"), false},
		{"url never matches an unparsable url", byURL("*://*/*"), "s", https("::not a url"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Policy{Denied: []PolicyEntry{tt.entry}}
			require.NoError(t, p.Validate())
			ok, reason := p.Check(tt.server, tt.sc)
			assert.Equal(t, tt.want, !ok, "denied; reason %q", reason)
		})
	}
}

func TestWildcardMatch(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"", "", true},
		{"", "a", false},
		{"*", "", true},
		{"*", "any/thing at all", true},
		{"a*", "a", true},
		{"a*b", "ab", true},
		{"a*b", "a/x/b", true},
		{"a*b", "a/x/bc", false},
		{"*a*b*", "xaybz", true},
		{"a**b", "ab", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false},
		{"a?c", "abc", false},
		{"a?c", "a?c", true},
		{"[ab]", "a", false},
		{"*aab", "aaaab", true}, // needs backtracking
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, wildcardMatch(tt.pattern, tt.s), "%q ~ %q", tt.pattern, tt.s)
	}
}

func TestServerPolicyCheck(t *testing.T) {
	github := stdio("npx", "-y", "@modelcontextprotocol/server-github")
	docs := remote(transports.TypeHTTP, "https://docs.corp.example.com/mcp")
	inproc := mcpvisor.ServerConfig{Config: transports.Config{Type: transports.TypeSDK}}

	tests := []struct {
		name       string
		policy     *Policy
		server     string
		sc         mcpvisor.ServerConfig
		wantReason string // empty: allowed
	}{
		{name: "nil policy allows", policy: nil, server: "github", sc: github},
		{name: "zero policy allows", policy: &Policy{}, server: "github", sc: github},
		{name: "absent allow list allows what is not denied",
			policy: &Policy{Denied: []PolicyEntry{{ServerName: "other"}}}, server: "github", sc: github},
		{name: "empty allow list allows nothing",
			policy: &Policy{Allowed: allow()}, server: "github", sc: github,
			wantReason: "allowedMcpServers is empty: no server may run"},
		{name: "empty allow list allows nothing, in-process servers included",
			policy: &Policy{Allowed: allow()}, server: "inproc", sc: inproc,
			wantReason: "allowedMcpServers is empty: no server may run"},
		{name: "allowed by name",
			policy: &Policy{Allowed: allow(PolicyEntry{ServerName: "git*"})}, server: "github", sc: github},
		{name: "not allowed by name",
			policy: &Policy{Allowed: allow(PolicyEntry{ServerName: "sentry"})}, server: "github", sc: github,
			wantReason: "no allowedMcpServers serverName entry matches its name"},
		{name: "deny beats allow",
			policy: &Policy{
				Allowed: allow(PolicyEntry{ServerName: "github"}),
				Denied:  []PolicyEntry{{ServerName: "sentry"}, {ServerCommand: CommandPattern{Glob: "npx *"}}},
			},
			server: "github", sc: github,
			wantReason: `deniedMcpServers[1] (serverCommand "npx *")`},
		{name: "the first denying entry is named",
			policy: &Policy{Denied: []PolicyEntry{{ServerName: "*"}, {ServerName: "github"}}},
			server: "github", sc: github,
			wantReason: `deniedMcpServers[0] (serverName "*")`},
		{name: "deny by exact command is reported as an array",
			policy: &Policy{Denied: []PolicyEntry{{ServerCommand: CommandPattern{Exact: []string{"npx", "-y", "@modelcontextprotocol/server-github"}}}}},
			server: "github", sc: github,
			wantReason: `deniedMcpServers[0] (serverCommand ["npx","-y","@modelcontextprotocol/server-github"])`},
		{name: "deny by url",
			policy: &Policy{Denied: []PolicyEntry{{ServerURL: "https://*.corp.example.com/*"}}},
			server: "docs", sc: docs,
			wantReason: `deniedMcpServers[0] (serverUrl "https://*.corp.example.com/*")`},
		{name: "deny by name applies to a server the allow list admits by command",
			policy: &Policy{
				Allowed: allow(PolicyEntry{ServerCommand: CommandPattern{Glob: "npx *"}}),
				Denied:  []PolicyEntry{{ServerName: "github"}},
			},
			server: "github", sc: github, wantReason: `deniedMcpServers[0] (serverName "github")`},

		// A name is a label its config's author picks: when the allow list
		// pins stdio servers by command or remote servers by URL, a name
		// entry does not admit a server of that kind.
		{name: "stdio server must match a command entry when there is one",
			policy: &Policy{Allowed: allow(PolicyEntry{ServerName: "github"}, PolicyEntry{ServerCommand: CommandPattern{Exact: []string{"approved"}}})},
			server: "github", sc: github,
			wantReason: "no allowedMcpServers serverCommand entry matches its command line (a stdio server must match one when the list has any)"},
		{name: "stdio server matching a command entry",
			policy: &Policy{Allowed: allow(PolicyEntry{ServerName: "other"}, PolicyEntry{ServerCommand: CommandPattern{Glob: "npx -y @modelcontextprotocol/*"}})},
			server: "github", sc: github},
		{name: "url entries do not pin stdio servers",
			policy: &Policy{Allowed: allow(PolicyEntry{ServerName: "github"}, PolicyEntry{ServerURL: "https://*/*"})},
			server: "github", sc: github},
		{name: "remote server must match a url entry when there is one",
			policy: &Policy{Allowed: allow(PolicyEntry{ServerName: "docs"}, PolicyEntry{ServerURL: "https://mcp.example.com/*"})},
			server: "docs", sc: docs,
			wantReason: "no allowedMcpServers serverUrl entry matches its url (a remote server must match one when the list has any)"},
		{name: "remote server matching a url entry",
			policy: &Policy{Allowed: allow(PolicyEntry{ServerURL: "https://*.corp.example.com/*"})},
			server: "docs", sc: docs},
		{name: "command entries do not pin remote servers",
			policy: &Policy{Allowed: allow(PolicyEntry{ServerName: "docs"}, PolicyEntry{ServerCommand: CommandPattern{Glob: "*"}})},
			server: "docs", sc: docs},
		{name: "remote server with only command entries is not allowed",
			policy: &Policy{Allowed: allow(PolicyEntry{ServerCommand: CommandPattern{Glob: "*"}})},
			server: "docs", sc: docs,
			wantReason: "no allowedMcpServers serverName entry matches its name"},
		{name: "in-process server is allowed by name only",
			policy: &Policy{Allowed: allow(PolicyEntry{ServerName: "inproc"}, PolicyEntry{ServerCommand: CommandPattern{Glob: "*"}}, PolicyEntry{ServerURL: "*://*/*"})},
			server: "inproc", sc: inproc},

		{name: "source prefixes the reason",
			policy: &Policy{Denied: []PolicyEntry{{ServerName: "github"}}, Source: "/etc/mcpvisor/managed-mcp.json"},
			server: "github", sc: github,
			wantReason: `/etc/mcpvisor/managed-mcp.json: deniedMcpServers[0] (serverName "github")`},
		{name: "malformed policy allows nothing",
			policy: &Policy{Denied: []PolicyEntry{{}}, Source: "host"},
			server: "github", sc: github,
			wantReason: `host: malformed policy: deniedMcpServers[0]: entry needs one of "serverName", "serverCommand" or "serverUrl"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, reason := tt.policy.Check(tt.server, tt.sc)
			assert.Equal(t, tt.wantReason == "", ok)
			assert.Equal(t, tt.wantReason, reason)
		})
	}
}

func TestServerPolicyCheckDoesNotEchoSecrets(t *testing.T) {
	p := &Policy{Allowed: allow(PolicyEntry{ServerURL: "https://ok.example.com/*"}, PolicyEntry{ServerCommand: CommandPattern{Glob: "ok"}})}
	for _, sc := range []mcpvisor.ServerConfig{
		remote(transports.TypeHTTP, "https://evil.example.com/mcp?token=sk-live-secret"),
		stdio("server", "--token", "sk-live-secret"),
	} {
		ok, reason := p.Check("s", sc)
		assert.False(t, ok)
		assert.NotContains(t, reason, "sk-live-secret")
	}
}

func TestServerPolicyValidate(t *testing.T) {
	tests := []struct {
		name     string
		policy   Policy
		wantPath string
		wantErr  string
	}{
		{name: "entry with no member", policy: Policy{Allowed: allow(PolicyEntry{ServerName: "a"}, PolicyEntry{})},
			wantPath: "allowedMcpServers[1]", wantErr: `entry needs one of "serverName", "serverCommand" or "serverUrl"`},
		{name: "entry with two members", policy: Policy{Denied: []PolicyEntry{{ServerName: "a", ServerURL: "https://h/"}}},
			wantPath: "deniedMcpServers[0]", wantErr: `entry has "serverName" and "serverUrl"; an entry has exactly one`},
		{name: "entry with three members", policy: Policy{Denied: []PolicyEntry{{ServerName: "a", ServerCommand: CommandPattern{Glob: "x"}, ServerURL: "https://h/"}}},
			wantPath: "deniedMcpServers[0]", wantErr: `entry has "serverName" and "serverCommand" and "serverUrl"`},
		{name: "malformed name pattern", policy: Policy{Denied: []PolicyEntry{{ServerName: "[a-"}}},
			wantPath: "deniedMcpServers[0].serverName", wantErr: `malformed pattern "[a-"`},
		{name: "command with both forms", policy: Policy{Denied: []PolicyEntry{{ServerCommand: CommandPattern{Exact: []string{"a"}, Glob: "a"}}}},
			wantPath: "deniedMcpServers[0].serverCommand", wantErr: "both Exact and Glob are set"},
		{name: "empty exact command", policy: Policy{Denied: []PolicyEntry{{ServerCommand: CommandPattern{Exact: []string{}}}}},
			wantPath: "deniedMcpServers[0].serverCommand", wantErr: "command must not be empty"},
		{name: "url without scheme", policy: Policy{Allowed: allow(PolicyEntry{ServerURL: "*.example.com/*"})},
			wantPath: "allowedMcpServers[0].serverUrl", wantErr: `malformed URL pattern "*.example.com/*": no scheme`},
		{name: "url without host", policy: Policy{Allowed: allow(PolicyEntry{ServerURL: "https:///mcp"})},
			wantPath: "allowedMcpServers[0].serverUrl", wantErr: "no host"},
		{name: "url with user information", policy: Policy{Allowed: allow(PolicyEntry{ServerURL: "https://*@h/*"})},
			wantPath: "allowedMcpServers[0].serverUrl", wantErr: "user information"},
		{name: "url with fragment", policy: Policy{Allowed: allow(PolicyEntry{ServerURL: "https://h/#x"})},
			wantPath: "allowedMcpServers[0].serverUrl", wantErr: "fragment"},
		{name: "url with bad port", policy: Policy{Allowed: allow(PolicyEntry{ServerURL: "https://h:http/"})},
			wantPath: "allowedMcpServers[0].serverUrl", wantErr: "a port is digits or '*'"},
		{name: "url with empty port", policy: Policy{Allowed: allow(PolicyEntry{ServerURL: "https://h:/"})},
			wantPath: "allowedMcpServers[0].serverUrl", wantErr: "a port is digits or '*'"},
		{name: "url with unclosed ipv6 host", policy: Policy{Allowed: allow(PolicyEntry{ServerURL: "https://[::1/"})},
			wantPath: "allowedMcpServers[0].serverUrl", wantErr: "unclosed '['"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.policy.Source = "host policy"
			err := tt.policy.Validate()
			var ce *Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "host policy", ce.File)
			assert.Equal(t, tt.wantPath, ce.Path)
			assert.Contains(t, ce.Err.Error(), tt.wantErr)
			assert.Contains(t, err.Error(), "host policy: "+tt.wantPath+": ")
		})
	}

	t.Run("valid and nil policies", func(t *testing.T) {
		var nilPolicy *Policy
		assert.NoError(t, nilPolicy.Validate())
		assert.NoError(t, (&Policy{Allowed: allow()}).Validate())
		assert.NoError(t, (&Policy{Allowed: allow(
			PolicyEntry{ServerName: "*"},
			PolicyEntry{ServerCommand: CommandPattern{Exact: []string{"a", ""}}},
			PolicyEntry{ServerURL: "*://*"},
			PolicyEntry{ServerURL: "http://[::1]:*/*"},
		)}).Validate())
	})
	t.Run("errors are collected, without a Source", func(t *testing.T) {
		err := (&Policy{Allowed: allow(PolicyEntry{}), Denied: []PolicyEntry{{ServerURL: "x"}}}).Validate()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "allowedMcpServers[0]: entry needs one of")
		assert.Contains(t, err.Error(), "\ndeniedMcpServers[0].serverUrl: malformed URL pattern")
	})
}

// TestServerPolicyJSON: the managed file's lists decode into a Policy
// with encoding/json, and round-trip, absent and empty allow lists
// included.
func TestServerPolicyJSON(t *testing.T) {
	tests := []struct {
		name string
		json string
		want Policy
	}{
		{name: "absent allow list", json: `{"deniedMcpServers":[{"serverName":"x"}]}`,
			want: Policy{Denied: []PolicyEntry{{ServerName: "x"}}}},
		{name: "empty allow list", json: `{"allowedMcpServers":[]}`,
			want: Policy{Allowed: allow()}},
		{name: "every kind of entry", json: `{"allowedMcpServers":[{"serverName":"a"},{"serverCommand":["npx","-y","p"]},{"serverCommand":"npx *"},{"serverUrl":"https://*/*"}]}`,
			want: Policy{Allowed: allow(
				PolicyEntry{ServerName: "a"},
				PolicyEntry{ServerCommand: CommandPattern{Exact: []string{"npx", "-y", "p"}}},
				PolicyEntry{ServerCommand: CommandPattern{Glob: "npx *"}},
				PolicyEntry{ServerURL: "https://*/*"},
			)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Policy
			require.NoError(t, json.Unmarshal([]byte(tt.json), &got))
			assert.Equal(t, tt.want, got)
			out, err := json.Marshal(got)
			require.NoError(t, err)
			assert.JSONEq(t, tt.json, string(out))
		})
	}

	var none []PolicyEntry // an allow list a program built empty
	out, err := json.Marshal(Policy{Allowed: &none})
	require.NoError(t, err)
	assert.JSONEq(t, `{"allowedMcpServers":[]}`, string(out), "allows nothing, in JSON too")
	ok, _ := (&Policy{Allowed: &none}).Check("s", stdio("x"))
	assert.False(t, ok)

	var p Policy
	err = json.Unmarshal([]byte(`{"deniedMcpServers":[{"serverCommand":3}]}`), &p)
	assert.ErrorContains(t, err, "serverCommand: want array or string, got number")
	require.NoError(t, json.Unmarshal([]byte(`{"allowedMcpServers":null}`), &p))
	assert.Nil(t, p.Allowed, "null is absent")
}

func TestLoadConfigPolicy(t *testing.T) {
	const (
		dir           = "testdata/config/policy"
		policyOnly    = dir + "/managed-policy-only.json"
		serversPolicy = dir + "/managed-servers-and-policy.json"
		serversNoPol  = "testdata/config/layers/managed/managed-mcp.json"
		home          = dir + "/home"
		project       = dir + "/project"
		userFile      = home + "/.mcp.json"
		projectFile   = project + "/.mcp.json"
	)
	env := fakeEnv(map[string]string{"TEAM": "infra"})

	tests := []struct {
		name         string
		opts         Options
		wantServers  []string
		wantExcluded map[string]string
		wantFiles    []string
		wantPolicies []string // sources
	}{
		{
			name: "managed file with only a policy: the layers load, filtered",
			opts: Options{Approvals: approveAll{}, Home: home, Dir: project, ManagedFile: policyOnly},
			// github and corp-tools match an allowed command, docs an allowed URL.
			wantServers: []string{"corp-tools", "docs", "github"},
			wantExcluded: map[string]string{
				"sneaky":       policyOnly + `: deniedMcpServers[2] (serverCommand "* evil-pkg*")`,
				"renamed-evil": policyOnly + `: deniedMcpServers[0] (serverName "renamed-*")`,
				"tracker":      policyOnly + `: deniedMcpServers[1] (serverUrl "*://*.evil.example.net/*")`,
				// Its name matches {"serverName": "local-*"}, but the list pins stdio servers by command.
				"local-notes": policyOnly + ": no allowedMcpServers serverCommand entry matches its command line (a stdio server must match one when the list has any)",
			},
			wantFiles:    []string{userFile, projectFile},
			wantPolicies: []string{policyOnly},
		},
		{
			name:        "managed file with servers and a policy: exclusive, and filtered",
			opts:        Options{Approvals: approveAll{}, Home: home, Dir: project, ManagedFile: serversPolicy},
			wantServers: []string{"corp-docs"},
			wantExcluded: map[string]string{
				"corp-legacy": serversPolicy + ": no allowedMcpServers serverUrl entry matches its url (a remote server must match one when the list has any)",
				"scratch":     serversPolicy + `: deniedMcpServers[0] (serverName "scratch")`,
			},
			wantFiles:    []string{serversPolicy},
			wantPolicies: []string{serversPolicy},
		},
		{
			name:         "managed file with servers only: exclusive, no policy",
			opts:         Options{Approvals: approveAll{}, Home: home, Dir: project, ManagedFile: serversNoPol},
			wantServers:  []string{"policy"},
			wantExcluded: map[string]string{},
			wantFiles:    []string{serversNoPol},
		},
		{
			name:        "explicit files skip the managed servers but not the managed policy",
			opts:        Options{Files: []string{projectFile}, ManagedFile: serversPolicy},
			wantServers: []string{"docs"},
			wantExcluded: map[string]string{
				"github":       serversPolicy + ": no allowedMcpServers serverName entry matches its name",
				"corp-tools":   serversPolicy + ": no allowedMcpServers serverName entry matches its name",
				"renamed-evil": serversPolicy + ": no allowedMcpServers serverName entry matches its name",
				"local-notes":  serversPolicy + ": no allowedMcpServers serverName entry matches its name",
				"tracker":      serversPolicy + ": no allowedMcpServers serverUrl entry matches its url (a remote server must match one when the list has any)",
			},
			wantFiles:    []string{projectFile},
			wantPolicies: []string{serversPolicy},
		},
		{
			name:        "Options.Policy alone",
			opts:        Options{Approvals: approveAll{}, Home: home, Dir: project, ManagedFile: noManaged(t), Policy: &Policy{Allowed: allow(PolicyEntry{ServerName: "*"}), Denied: []PolicyEntry{{ServerName: "*e*"}}}},
			wantServers: []string{"corp-tools", "docs", "github"},
			wantExcluded: map[string]string{
				"sneaky":       `config.Options.Policy: deniedMcpServers[0] (serverName "*e*")`,
				"renamed-evil": `config.Options.Policy: deniedMcpServers[0] (serverName "*e*")`,
				"tracker":      `config.Options.Policy: deniedMcpServers[0] (serverName "*e*")`,
				"local-notes":  `config.Options.Policy: deniedMcpServers[0] (serverName "*e*")`,
			},
			wantFiles:    []string{userFile, projectFile},
			wantPolicies: []string{PolicyOptionSource},
		},
		{
			name: "managed policy and Options.Policy: a server must pass both, the managed file is checked first",
			opts: Options{Approvals: approveAll{}, Home: home, Dir: project, ManagedFile: policyOnly, Policy: &Policy{
				Source: "host", Denied: []PolicyEntry{{ServerName: "github"}, {ServerName: "tracker"}},
			}},
			wantServers: []string{"corp-tools", "docs"},
			wantExcluded: map[string]string{
				"github":       `host: deniedMcpServers[0] (serverName "github")`,
				"tracker":      policyOnly + `: deniedMcpServers[1] (serverUrl "*://*.evil.example.net/*")`,
				"sneaky":       policyOnly + `: deniedMcpServers[2] (serverCommand "* evil-pkg*")`,
				"renamed-evil": policyOnly + `: deniedMcpServers[0] (serverName "renamed-*")`,
				"local-notes":  policyOnly + ": no allowedMcpServers serverCommand entry matches its command line (a stdio server must match one when the list has any)",
			},
			wantFiles:    []string{userFile, projectFile},
			wantPolicies: []string{policyOnly, "host"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.LookupEnv = env
			cfg, err := Load(opts)
			require.NoError(t, err)
			got := slices.Sorted(maps.Keys(cfg.Servers))
			if got == nil {
				got = []string{}
			}
			assert.Equal(t, tt.wantServers, got)
			assert.Equal(t, tt.wantExcluded, cfg.Excluded)
			assert.NotNil(t, cfg.Excluded)
			assert.Equal(t, slices.Sorted(maps.Keys(cfg.Servers)), slices.Sorted(maps.Keys(cfg.Sources)), "Sources has exactly the keys of Servers")
			assert.Equal(t, tt.wantFiles, cfg.Files)
			var sources []string
			for _, p := range cfg.Policies {
				sources = append(sources, p.Source)
			}
			assert.Equal(t, tt.wantPolicies, sources)
		})
	}
}

func TestLoadConfigPolicyOnlyInManagedFile(t *testing.T) {
	dir := t.TempDir()
	// In a layer, the lists are unknown top-level members: ignored.
	layer := writeFile(t, dir, ".mcp.json", `{"mcpServers": {"a": {"command": "x"}}, "deniedMcpServers": [{"serverName": "*"}], "allowedMcpServers": []}`)
	cfg, err := Load(Options{Approvals: approveAll{}, Home: t.TempDir(), Dir: dir, ManagedFile: noManaged(t)})
	require.NoError(t, err)
	assert.Contains(t, cfg.Servers, "a")
	assert.Empty(t, cfg.Excluded)
	assert.Empty(t, cfg.Policies)

	// A policy alone does not make a server file.
	policyOnly := writeFile(t, dir, "policy.json", `{"deniedMcpServers": [{"serverName": "*"}]}`)
	_, err = Load(Options{Files: []string{layer, policyOnly}, ManagedFile: noManaged(t)})
	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, policyOnly, ce.File)
	assert.EqualError(t, ce.Err, `no "mcpServers" or "servers" member`)

	// LoadFiles applies no policy.
	cfg, err = LoadFiles(layer)
	require.NoError(t, err)
	assert.Contains(t, cfg.Servers, "a")
	assert.NotNil(t, cfg.Excluded)
	assert.Empty(t, cfg.Excluded)
}

func TestLoadConfigPolicyErrors(t *testing.T) {
	tests := []struct {
		name     string
		managed  string
		wantPath string
		wantErr  string
	}{
		{name: "neither servers nor policy", managed: `{"allowManagedMcpServersOnly": true}`,
			wantErr: `no "mcpServers", "servers", "allowedMcpServers", "deniedMcpServers", "projectServers" or "requireSandbox" member`},
		{name: "null lists are absent", managed: `{"allowedMcpServers": null, "deniedMcpServers": null}`,
			wantErr: `no "mcpServers", "servers", "allowedMcpServers", "deniedMcpServers", "projectServers" or "requireSandbox" member`},
		{name: "not an object", managed: `[]`,
			wantErr: `want a JSON object with "mcpServers", "servers", "allowedMcpServers", "deniedMcpServers", "projectServers" or "requireSandbox", got array`},
		{name: "list not an array", managed: `{"allowedMcpServers": {"serverName": "a"}}`,
			wantPath: "allowedMcpServers", wantErr: "want array, got object"},
		{name: "entry not an object", managed: `{"deniedMcpServers": [{"serverName": "a"}, "b"]}`,
			wantPath: "deniedMcpServers[1]", wantErr: "want object, got string"},
		{name: "entry with no member", managed: `{"allowedMcpServers": [{"serverName": "a"}, {"serverName": "b"}, {}]}`,
			wantPath: "allowedMcpServers[2]", wantErr: `entry needs one of "serverName", "serverCommand" or "serverUrl"`},
		{name: "entry with only null members", managed: `{"allowedMcpServers": [{"serverName": null}]}`,
			wantPath: "allowedMcpServers[0]", wantErr: `entry needs one of`},
		{name: "entry with two members", managed: `{"allowedMcpServers": [{"serverName": "a", "serverUrl": "https://h/*"}]}`,
			wantPath: "allowedMcpServers[0]", wantErr: `entry has "serverName" and "serverUrl"; an entry has exactly one`},
		{name: "misspelt member", managed: `{"deniedMcpServers": [{"serverName": "a", "serverurl": "https://h/*"}]}`,
			wantPath: "deniedMcpServers[0].serverurl", wantErr: `unknown member "serverurl"`},
		{name: "member names are case-sensitive", managed: `{"deniedMcpServers": [{"ServerName": "a"}]}`,
			wantPath: "deniedMcpServers[0].ServerName", wantErr: `unknown member "ServerName"`},
		{name: "name not a string", managed: `{"deniedMcpServers": [{"serverName": ["a"]}]}`,
			wantPath: "deniedMcpServers[0].serverName", wantErr: "want string, got array"},
		{name: "empty name", managed: `{"deniedMcpServers": [{"serverName": ""}]}`,
			wantPath: "deniedMcpServers[0].serverName", wantErr: "must not be empty"},
		{name: "malformed name pattern", managed: `{"deniedMcpServers": [{"serverName": "a["}]}`,
			wantPath: "deniedMcpServers[0].serverName", wantErr: `malformed pattern "a["`},
		{name: "command a number", managed: `{"deniedMcpServers": [{"serverCommand": 1}]}`,
			wantPath: "deniedMcpServers[0].serverCommand", wantErr: "want array or string, got number"},
		{name: "command element a number", managed: `{"deniedMcpServers": [{"serverCommand": ["npx", 1]}]}`,
			wantPath: "deniedMcpServers[0].serverCommand[1]", wantErr: "want string, got number"},
		{name: "command element null", managed: `{"deniedMcpServers": [{"serverCommand": ["npx", null]}]}`,
			wantPath: "deniedMcpServers[0].serverCommand[1]", wantErr: "want string, got null"},
		{name: "empty command array", managed: `{"deniedMcpServers": [{"serverCommand": []}]}`,
			wantPath: "deniedMcpServers[0].serverCommand", wantErr: "command must not be empty"},
		{name: "empty command string", managed: `{"deniedMcpServers": [{"serverCommand": ""}]}`,
			wantPath: "deniedMcpServers[0].serverCommand", wantErr: "must not be empty"},
		{name: "url pattern without scheme", managed: `{"allowedMcpServers": [{"serverUrl": "mcp.example.com"}]}`,
			wantPath: "allowedMcpServers[0].serverUrl", wantErr: `malformed URL pattern "mcp.example.com": no scheme`},
		{name: "policy values are not expanded", managed: `{"allowedMcpServers": [{"serverUrl": "${CORP_URL}"}]}`,
			wantPath: "allowedMcpServers[0].serverUrl", wantErr: "no scheme"},
		{name: "bad policy with servers", managed: `{"mcpServers": {"a": {"command": "x"}}, "deniedMcpServers": [{}]}`,
			wantPath: "deniedMcpServers[0]", wantErr: "entry needs one of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			managed := writeFile(t, t.TempDir(), "managed-mcp.json", tt.managed)
			for _, opts := range []Options{
				{Home: t.TempDir(), Dir: t.TempDir(), ManagedFile: managed},
				{Files: []string{writeFile(t, t.TempDir(), "a.json", `{"servers": {}}`)}, ManagedFile: managed},
			} {
				cfg, err := Load(opts)
				assert.Nil(t, cfg)
				var ce *Error
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, managed, ce.File)
				assert.Equal(t, tt.wantPath, ce.Path)
				assert.Contains(t, ce.Err.Error(), tt.wantErr)
			}
		})
	}

	t.Run("every malformed entry is reported", func(t *testing.T) {
		managed := writeFile(t, t.TempDir(), "managed-mcp.json",
			`{"allowedMcpServers": [{}, {"serverName": "ok"}, {"serverUrl": "x"}], "deniedMcpServers": [{"serverName": 1}]}`)
		_, err := Load(Options{Approvals: approveAll{}, Home: t.TempDir(), Dir: t.TempDir(), ManagedFile: managed})
		require.Error(t, err)
		for _, want := range []string{
			managed + ": allowedMcpServers[0]: entry needs one of",
			managed + ": allowedMcpServers[2].serverUrl: malformed URL pattern",
			managed + ": deniedMcpServers[0].serverName: want string, got number",
		} {
			assert.Contains(t, err.Error(), want)
		}
	})
	t.Run("a broken server map of the managed file does not matter to explicit files", func(t *testing.T) {
		managed := writeFile(t, t.TempDir(), "managed-mcp.json", `{"mcpServers": {"a": {"command": "${UNSET}"}}, "deniedMcpServers": [{"serverName": "b"}]}`)
		file := writeFile(t, t.TempDir(), "a.json", `{"servers": {"b": {"command": "b"}, "c": {"command": "c"}}}`)
		cfg, err := Load(Options{Files: []string{file}, ManagedFile: managed, LookupEnv: fakeEnv(nil)})
		require.NoError(t, err)
		assert.Equal(t, []string{"c"}, slices.Sorted(maps.Keys(cfg.Servers)))
		assert.Equal(t, map[string]string{"b": managed + `: deniedMcpServers[0] (serverName "b")`}, cfg.Excluded)
	})
	t.Run("unreadable managed file fails explicit files too", func(t *testing.T) {
		managed := t.TempDir() // a directory
		file := writeFile(t, t.TempDir(), "a.json", `{"servers": {}}`)
		_, err := Load(Options{Files: []string{file}, ManagedFile: managed})
		var ce *Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, managed, ce.File)
	})
	t.Run("malformed Options.Policy", func(t *testing.T) {
		policy := &Policy{Allowed: allow(PolicyEntry{ServerName: "a"}, PolicyEntry{ServerName: "b", ServerURL: "https://h/"})}
		_, err := Load(Options{Approvals: approveAll{}, Home: t.TempDir(), Dir: t.TempDir(), ManagedFile: noManaged(t), Policy: policy})
		var ce *Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, PolicyOptionSource, ce.File)
		assert.Equal(t, "allowedMcpServers[1]", ce.Path)
		assert.EqualError(t, err, `config.Options.Policy: allowedMcpServers[1]: entry has "serverName" and "serverUrl"; an entry has exactly one`)
		assert.Empty(t, policy.Source, "Load does not modify the caller's policy")
	})
}

func TestConfigCheck(t *testing.T) {
	cfg, err := Load(Options{Approvals: approveAll{},
		Home: "testdata/config/policy/home", Dir: "testdata/config/policy/project",
		ManagedFile: "testdata/config/policy/managed-policy-only.json",
		Policy:      &Policy{Source: "host", Denied: []PolicyEntry{{ServerName: "blocked"}}},
	})
	require.NoError(t, err)

	// A server the host adds at runtime is vetted by the same policies.
	ok, reason := cfg.Check("corp-search", stdio("npx", "-y", "@corp/search"))
	assert.True(t, ok)
	assert.Empty(t, reason)
	ok, reason = cfg.Check("corp-search", stdio("node", "search.js"))
	assert.False(t, ok)
	assert.Contains(t, reason, "testdata/config/policy/managed-policy-only.json: no allowedMcpServers serverCommand entry")
	ok, reason = cfg.Check("blocked", remote(transports.TypeHTTP, "https://x.corp.example.com/mcp"))
	assert.False(t, ok)
	assert.Equal(t, `host: deniedMcpServers[0] (serverName "blocked")`, reason)

	ok, _ = (&Config{}).Check("any", stdio("x"))
	assert.True(t, ok, "no policies: everything may run")
}

func TestLoadConfigVSCodeVariables(t *testing.T) {
	const file = "testdata/config/vscode_variables.json"
	dir := t.TempDir()
	cfg, err := Load(Options{Files: []string{file}, Dir: dir, LookupEnv: fakeEnv(map[string]string{"workspaceFolder": "/from/env"})})
	require.NoError(t, err)
	sc := cfg.Servers["files"]
	assert.Equal(t, dir+"/bin/files-server", sc.Command, "${workspaceFolder} is Options.Dir, whatever the environment says")
	assert.Equal(t, []string{"--root", dir}, sc.Args)
	assert.Equal(t, dir, sc.Cwd)

	// A relative Dir is made absolute, as VS Code's variable is.
	cfg, err = Load(Options{Files: []string{file}, Dir: "testdata/config/policy/project"})
	require.NoError(t, err)
	abs, err := filepath.Abs("testdata/config/policy/project")
	require.NoError(t, err)
	assert.Equal(t, abs, cfg.Servers["files"].Cwd)

	// No Dir: the working directory; also for LoadFiles.
	wd := t.TempDir()
	t.Chdir(wd)
	moved := writeFile(t, wd, "mcp.json", `{"servers": {"files": {"command": "x", "cwd": "${workspaceFolder}/sub"}}}`)
	cfg, err = Load(Options{Files: []string{moved}})
	require.NoError(t, err)
	assert.Equal(t, wd+"/sub", cfg.Servers["files"].Cwd)
	cfg, err = LoadFiles(moved)
	require.NoError(t, err)
	assert.Equal(t, wd+"/sub", cfg.Servers["files"].Cwd)

	// The layers' project directory.
	writeFile(t, wd, ".mcp.json", `{"servers": {"files": {"command": "x", "cwd": "${workspaceFolder}"}}}`)
	cfg, err = Load(Options{Approvals: approveAll{}, Home: t.TempDir(), ManagedFile: noManaged(t)})
	require.NoError(t, err)
	assert.Equal(t, wd, cfg.Servers["files"].Cwd)

	// Input variables have no one to prompt.
	bad := writeFile(t, t.TempDir(), "mcp.json", `{"servers": {"api": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer ${input:api-key}"}}}}`)
	_, err = Load(Options{Files: []string{bad}})
	assert.ErrorIs(t, err, ErrInputVariable)
	assert.EqualError(t, err, bad+`: servers.api.headers.Authorization: ${input:api-key}: VS Code input variables are not supported; set the value in env or the file`)
}

// approveAll approves every entry of the untrusted layers, for the tests
// of layering that are not about approval.
type approveAll struct{}

func (approveAll) Approved(string, string, string) (bool, bool, error) { return true, false, nil }

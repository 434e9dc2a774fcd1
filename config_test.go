package mcpvisor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/transports"
)

// fakeEnv is an injectable environment for LoadOptions.LookupEnv.
func fakeEnv(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// noManaged is a managed-file path that does not exist, so that tests do
// not depend on the machine's /etc/mcpvisor.
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

func stdio(command string, args ...string) ServerConfig {
	return ServerConfig{Config: transports.Config{Command: command, Args: args}}
}

func TestLoadConfigShapes(t *testing.T) {
	tests := []struct {
		name string
		file string
		env  map[string]string
		want map[string]ServerConfig
	}{
		{
			name: "Claude Desktop mcpServers",
			file: "testdata/config/claude_desktop.json",
			env:  map[string]string{"HOME": "/home/ada", "GITHUB_TOKEN": "ghp_secret"},
			want: map[string]ServerConfig{
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
			want: map[string]ServerConfig{
				"memory": {Config: transports.Config{
					Type: transports.TypeStdio, Command: "npx",
					Args: []string{"-y", "@modelcontextprotocol/server-memory"},
					Cwd:  "/src/app",
				}},
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
			want: map[string]ServerConfig{
				"future": {
					Config: transports.Config{Command: "future-server"},
					Trust:  "trusted",
					Tools:  ToolFilter{Allow: []string{"read_*"}},
					OAuth:  []byte(`{"clientId": "abc", "scopes": ["repo"]}`),
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := LoadConfig(LoadOptions{Files: []string{tt.file}, LookupEnv: fakeEnv(tt.env)})
			require.NoError(t, err)
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
	cfg, err := LoadConfigFiles("testdata/config/base.json", "testdata/config/override.json")
	require.NoError(t, err)

	// beta is replaced whole: nothing of base.json's entry survives.
	assert.Equal(t, map[string]ServerConfig{
		"alpha": {Config: transports.Config{Command: "alpha-server", Args: []string{"--verbose"}, Env: map[string]string{"LEVEL": "debug"}}, Lazy: true},
		"beta":  {Config: transports.Config{Type: transports.TypeHTTP, URL: "https://beta.example.com/mcp"}},
		"gamma": stdio("gamma-server"),
	}, cfg.Servers)
	assert.Equal(t, map[string]string{
		"alpha": "testdata/config/base.json",
		"beta":  "testdata/config/override.json",
		"gamma": "testdata/config/override.json",
	}, cfg.Sources)
	assert.Equal(t, []string{"testdata/config/base.json", "testdata/config/override.json"}, cfg.Files)

	// The other order: base.json wins.
	cfg, err = LoadConfigFiles("testdata/config/override.json", "testdata/config/base.json")
	require.NoError(t, err)
	assert.Equal(t, "beta-server", cfg.Servers["beta"].Command)
	assert.Equal(t, 5000, cfg.Servers["beta"].TimeoutMs)
	assert.Equal(t, "testdata/config/base.json", cfg.Sources["beta"])
}

func TestLoadConfigFilesUsesProcessEnvironment(t *testing.T) {
	t.Setenv("MCPVISOR_TEST_TOKEN", "from-env")
	dir := t.TempDir()
	f := writeFile(t, dir, ".mcp.json", `{"mcpServers": {"s": {"command": "x", "env": {"T": "${MCPVISOR_TEST_TOKEN}"}}}}`)
	cfg, err := LoadConfigFiles(f)
	require.NoError(t, err)
	assert.Equal(t, "from-env", cfg.Servers["s"].Env["T"])
}

func TestLoadConfigFilesEmpty(t *testing.T) {
	cfg, err := LoadConfigFiles()
	require.NoError(t, err)
	assert.NotNil(t, cfg.Servers)
	assert.NotNil(t, cfg.Sources)
	assert.Empty(t, cfg.Servers)
	assert.Empty(t, cfg.Files)

	f := writeFile(t, t.TempDir(), "mcp.json", `{"servers": {}}`)
	cfg, err = LoadConfigFiles(f)
	require.NoError(t, err)
	assert.Empty(t, cfg.Servers)
	assert.Equal(t, []string{f}, cfg.Files)
}

func TestConfigErrorMessage(t *testing.T) {
	_, err := LoadConfigFiles("testdata/config/bad_args.json")
	require.Error(t, err)
	assert.EqualError(t, err, "testdata/config/bad_args.json: mcpServers.github.args[2]: want string, got number")

	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "testdata/config/bad_args.json", ce.File)
	assert.Equal(t, "mcpServers.github.args[2]", ce.Path)
	assert.EqualError(t, ce.Unwrap(), "want string, got number")

	// A whole-file problem has no path.
	assert.EqualError(t, &ConfigError{File: "a.json", Err: errors.New("boom")}, "a.json: boom")
}

func TestLoadConfigErrors(t *testing.T) {
	env := map[string]string{"SET": "v", "EMPTY": ""}
	tests := []struct {
		name     string
		content  string
		wantPath string
		wantErr  string // substring of the ConfigError's Err
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
			wantPath: "servers.a.headers.X", wantErr: `unsupported reference "${input:api-key}"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := writeFile(t, t.TempDir(), ".mcp.json", tt.content)
			cfg, err := LoadConfig(LoadOptions{Files: []string{file}, LookupEnv: fakeEnv(env)})
			require.Error(t, err)
			assert.Nil(t, cfg)

			var ce *ConfigError
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

	cfg, err := LoadConfig(LoadOptions{Files: []string{a, missing, b}, LookupEnv: fakeEnv(nil)})
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

	var ce *ConfigError
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
			"trust": "${TRUST}",
			"tools": {"allow": ["${TOOL}"]},
			"headers": {"${H}": "$HOME $${VAL}"}
		}
	}}`)
	env := fakeEnv(map[string]string{"NAME": "n", "BIN": "bin", "KEY": "k", "VAL": "val", "TRUST": "t", "TOOL": "x", "H": "h"})
	cfg, err := LoadConfig(LoadOptions{Files: []string{file}, LookupEnv: env})
	require.NoError(t, err)
	require.Contains(t, cfg.Servers, "${NAME}")
	sc := cfg.Servers["${NAME}"]
	assert.Equal(t, "bin", sc.Command)
	assert.Equal(t, map[string]string{"${KEY}": "val"}, sc.Env)
	assert.Equal(t, "${TRUST}", sc.Trust)
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
		{in: "${env:HOME}", wantErr: `unsupported reference "${env:HOME}"`},
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
		opts        LoadOptions
		wantFiles   []string
		wantCommand map[string]string // server → command (or url for remote servers)
		wantSources map[string]string
	}{
		{
			name:      "user, project and local, lowest first",
			opts:      LoadOptions{Home: home, Dir: project, ManagedFile: absent},
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
			opts:        LoadOptions{Home: empty, Dir: project, ManagedFile: absent},
			wantFiles:   []string{projectFile, localFile},
			wantCommand: map[string]string{"shared": "from-local", "project-only": "https://project.example.com/mcp"},
			wantSources: map[string]string{"shared": localFile, "project-only": projectFile},
		},
		{
			name:        "missing project and local layers skipped",
			opts:        LoadOptions{Home: home, Dir: empty, ManagedFile: absent},
			wantFiles:   []string{userFile},
			wantCommand: map[string]string{"shared": "from-home", "home-only": "home-server"},
			wantSources: map[string]string{"shared": userFile, "home-only": userFile},
		},
		{
			name:        "no files at all",
			opts:        LoadOptions{Home: empty, Dir: empty, ManagedFile: absent},
			wantFiles:   nil,
			wantCommand: map[string]string{},
			wantSources: map[string]string{},
		},
		{
			name:        "home equal to dir loads the file once",
			opts:        LoadOptions{Home: home, Dir: home + "/", ManagedFile: absent},
			wantFiles:   []string{userFile},
			wantCommand: map[string]string{"shared": "from-home", "home-only": "home-server"},
			wantSources: map[string]string{"shared": userFile, "home-only": userFile},
		},
		{
			name:        "managed file is exclusive",
			opts:        LoadOptions{Home: home, Dir: project, ManagedFile: managed},
			wantFiles:   []string{managed},
			wantCommand: map[string]string{"policy": "https://mcp.corp.example.com/infra"},
			wantSources: map[string]string{"policy": managed},
		},
		{
			name:        "explicit files bypass layers and the managed file",
			opts:        LoadOptions{Files: []string{localFile, userFile}, Home: home, Dir: project, ManagedFile: managed},
			wantFiles:   []string{localFile, userFile},
			wantCommand: map[string]string{"shared": "from-home", "home-only": "home-server"},
			wantSources: map[string]string{"shared": userFile, "home-only": userFile},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.LookupEnv = env
			cfg, err := LoadConfig(opts)
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
	cfg, err := LoadConfig(LoadOptions{
		Home: t.TempDir(), Dir: project, ManagedFile: noManaged(t),
		LookupEnv: fakeEnv(map[string]string{"LOCAL_TOKEN": "tok"}),
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"--token", "tok"}, cfg.Servers["shared"].Args)
}

func TestLoadConfigLayerErrors(t *testing.T) {
	t.Run("broken layer fails the load", func(t *testing.T) {
		dir := t.TempDir()
		local := writeFile(t, dir, ".mcp.local.json", `{"mcpServers": {"a": {"command": ["x"]}}}`)
		_, err := LoadConfig(LoadOptions{Home: t.TempDir(), Dir: dir, ManagedFile: noManaged(t)})
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, local, ce.File)
		assert.Equal(t, "mcpServers.a.command", ce.Path)
	})
	t.Run("broken managed file fails the load", func(t *testing.T) {
		managed := writeFile(t, t.TempDir(), "managed-mcp.json", `{"servers": {"a": {}}}`)
		_, err := LoadConfig(LoadOptions{Home: t.TempDir(), Dir: t.TempDir(), ManagedFile: managed})
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, managed, ce.File)
		assert.Equal(t, "servers.a", ce.Path)
	})
	t.Run("unreadable managed file is not ignored", func(t *testing.T) {
		managed := t.TempDir() // a directory: it exists but cannot be read as a file
		_, err := LoadConfig(LoadOptions{Home: t.TempDir(), Dir: t.TempDir(), ManagedFile: managed})
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, managed, ce.File)
	})
	t.Run("unreadable layer is not skipped", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(dir, ".mcp.json"), 0o700))
		_, err := LoadConfig(LoadOptions{Home: t.TempDir(), Dir: dir, ManagedFile: noManaged(t)})
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, filepath.Join(dir, ".mcp.json"), ce.File)
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

	cfg, err := LoadConfig(LoadOptions{ManagedFile: noManaged(t)})
	require.NoError(t, err)
	assert.Equal(t, "u", cfg.Servers["user"].Command)
	assert.Equal(t, "p", cfg.Servers["project"].Command, "nil LookupEnv reads the process environment")
	require.Len(t, cfg.Files, 2)
	assert.Equal(t, filepath.Join(home, ".mcp.json"), cfg.Files[0])
}

// TestLoadConfigDecodeValueTypes covers the decoder on member types that
// ServerConfig does not use yet, so that a member added later decodes as
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
	_, err := LoadConfigFiles(missing)
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
	cfg, err := LoadConfig(LoadOptions{Files: []string{file}, LookupEnv: env})
	require.NoError(t, err)
	sc := cfg.Servers["api"]
	assert.Equal(t, "https://mcp.example.com/mcp", sc.URL)
	assert.Equal(t, "Bearer t0k", sc.Headers["Authorization"])
	require.NotNil(t, sc.TLS)
	assert.Equal(t, TLSConfig{CAFile: "/etc/certs/ca.pem", CertFile: "/etc/certs/client.pem", KeyFile: "/etc/certs/client.key", ServerName: "mcp.internal"}, *sc.TLS)

	bad := writeFile(t, t.TempDir(), ".mcp.json", `{"mcpServers": {"api": {"url": "https://h", "tls": {"caFile": "${NOPE}"}}}}`)
	_, err = LoadConfig(LoadOptions{Files: []string{bad}, LookupEnv: env})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "mcpServers.api.tls.caFile", ce.Path)
	assert.ErrorIs(t, err, ErrUnsetVariable)
}

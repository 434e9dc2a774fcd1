package main

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/oauthtest"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// auth login runs the code flow through a loopback redirect (the test is
// the browser), the stored tokens serve call, status shows them without
// their values, and logout forgets them.
func TestAuthLoginStatusLogout(t *testing.T) {
	srv, err := mockserver.Serve(context.Background(), mockserver.Options{Transport: mockserver.TransportHTTP})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	mu, err := url.Parse(srv.URL)
	require.NoError(t, err)
	as, err := oauthtest.New("http://"+mu.Host, 3600)
	require.NoError(t, err)
	t.Cleanup(as.Close)
	as.SetScopes("mcp:tools")
	serverURL := as.URL + "/mcp"
	cfg := writeConfig(t, map[string]any{"r": map[string]any{"type": "http", "url": serverURL}})
	store := filepath.Join(t.TempDir(), "tokens.json")
	env := []string{envTokenStore + "=" + store, "DISPLAY=", "WAYLAND_DISPLAY="}

	// Before login, the server needs auth.
	r := cliIn(t, "", env, "call", "--config", cfg, "mcp__r__echo", `{"text":"x"}`)
	assert.Equal(t, 1, r.code)

	login := exec.CommandContext(testwait.Context(t), binPath, "auth", "login", "--config", cfg, "--no-browser", "r")
	login.Env = cliEnv(env...)
	login.WaitDelay = time.Second
	stderr, err := login.StderrPipe()
	require.NoError(t, err)
	var stdout strings.Builder
	login.Stdout = &stdout
	require.NoError(t, login.Start())
	lines := testwait.NewLineReader(t, stderr)
	var authURL string
	for authURL == "" {
		line, err := lines.Line("the authorization URL printed by auth login")
		require.NoError(t, err, "auth login printed no URL")
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "http") {
			authURL = line
		}
	}
	// The browser: follow the authorization server's redirect to the
	// loopback callback.
	resp, err := httpClient.Get(authURL)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	for { // the rest of stderr, to its end (Wait closes the pipe)
		if _, err := lines.Line("the end of auth login's stderr"); err != nil {
			break
		}
	}
	require.NoError(t, testwait.Result(t, "auth login to exit after the redirect", login.Wait))
	assert.Contains(t, stdout.String(), "authorized r")
	u, _ := url.Parse(authURL)
	assert.Equal(t, "mcp:tools", u.Query().Get("scope"))
	assert.True(t, strings.HasPrefix(u.Query().Get("redirect_uri"), "http://127.0.0.1:"))

	fi, err := os.Stat(store)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	r = cliIn(t, "", env, "call", "--config", cfg, "mcp__r__echo", `{"text":"hello"}`)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "hello")

	r = cliIn(t, "", env, "auth", "status", "--config", cfg, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var st struct {
		Servers []authStatusRow `json:"servers"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Len(t, st.Servers, 1)
	assert.Equal(t, "r", st.Servers[0].Server)
	assert.Equal(t, "authorized", st.Servers[0].State)
	assert.Equal(t, as.Issuer(), st.Servers[0].Issuer)
	r2 := cliIn(t, "", env, "auth", "status", "--config", cfg)
	for _, tok := range as.Tokens() {
		assert.NotContains(t, r.stdout+r2.stdout+r.stderr+r2.stderr, tok)
	}

	r = cliIn(t, "", env, "auth", "logout", "--config", cfg, "r")
	require.Equal(t, 0, r.code, r.stderr)
	r = cliIn(t, "", env, "auth", "status", "--config", cfg, "--json")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	assert.Equal(t, "none", st.Servers[0].State)

	r = cliIn(t, "", env, "auth", "login", "--config", cfg, "nope")
	assert.Equal(t, 1, r.code)
}

// The token store is chosen by --token-store (or its variable), a file
// named by MCPVISOR_TOKEN_STORE is the store unless another is chosen,
// auth status says which store is in use, and a store that does not
// exist is a usage error naming those that do.
func TestTokenStoreChoice(t *testing.T) {
	cfg := writeConfig(t, map[string]any{"r": map[string]any{"type": "http", "url": "http://127.0.0.1:9/mcp"}})
	store := filepath.Join(t.TempDir(), "tokens.json")
	env := []string{envTokenStore + "=" + store}

	r := cliIn(t, "", env, "auth", "status", "--config", cfg, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var st struct {
		Backend string `json:"backend"`
		Store   string `json:"store"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	assert.Equal(t, "file", st.Backend, "a named file is the store")
	assert.Equal(t, store, st.Store)

	r = cliIn(t, "", env, "auth", "status", "--config", cfg)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Token store: file ("+store+")")

	r = cliIn(t, "", env, "auth", "status", "--config", cfg, "--token-store", "vault")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "auto, file")

	r = cliIn(t, "", append(env, envTokenStoreBackend+"=keychain"), "auth", "status", "--config", cfg)
	if runtime.GOOS != "darwin" {
		assert.Equal(t, 1, r.code, "the keychain asked for where there is none is an error, not a silent file")
		assert.Contains(t, r.stderr, "not available")
	}
}

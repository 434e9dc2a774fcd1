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
	"github.com/mcpvisor/mcpvisor/oauth"
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

	authURL, _, stdout := authLogin(t, cfg, env)
	assert.Contains(t, stdout, "authorized r")
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

// authLogin runs `auth login --no-browser r` with args added, follows
// the authorization URL it shows on stderr (the test is the browser: the
// authorization server redirects to the loopback callback) and returns
// the URL, stderr's lines and stdout once it exited. The URL is a line of
// its own in text mode, the url of a JSON log line in JSON mode.
func authLogin(t *testing.T, cfg string, env []string, args ...string) (authURL string, stderrLines []string, stdout string) {
	t.Helper()
	login := exec.CommandContext(testwait.Context(t), binPath,
		append(append([]string{"auth", "login", "--config", cfg, "--no-browser"}, args...), "r")...)
	login.Env = cliEnv(env...)
	login.WaitDelay = time.Second
	stderr, err := login.StderrPipe()
	require.NoError(t, err)
	var out strings.Builder
	login.Stdout = &out
	require.NoError(t, login.Start())
	lines := testwait.NewLineReader(t, stderr)
	for authURL == "" {
		line, err := lines.Line("the authorization URL shown by auth login")
		require.NoError(t, err, "auth login showed no URL; stderr: %q", stderrLines)
		stderrLines = append(stderrLines, line)
		var m struct {
			URL string `json:"url"`
		}
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "http") {
			authURL = line
		} else if json.Unmarshal([]byte(line), &m) == nil && m.URL != "" {
			authURL = m.URL
		}
	}
	resp, err := httpClient.Get(authURL)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	for { // the rest of stderr, to its end (Wait closes the pipe)
		line, err := lines.Line("the end of auth login's stderr")
		if err != nil {
			break
		}
		stderrLines = append(stderrLines, line)
	}
	require.NoError(t, testwait.Result(t, "auth login to exit after the redirect", login.Wait))
	return authURL, stderrLines, out.String()
}

// auth login shows its authorization URL in the format of the rest of
// stderr: with --log-format json (and with auto when stderr is not a
// terminal) every line is a JSON object and the URL is the url of one
// of them; with --log-format text it is a line of its own, and no line
// is JSON. Before, the URL was plain text amid JSON log lines.
func TestAuthLoginShowsTheURLInTheLogFormat(t *testing.T) {
	srv, err := mockserver.Serve(context.Background(), mockserver.Options{Transport: mockserver.TransportHTTP})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	mu, err := url.Parse(srv.URL)
	require.NoError(t, err)
	as, err := oauthtest.New("http://"+mu.Host, 3600)
	require.NoError(t, err)
	t.Cleanup(as.Close)
	cfg := writeConfig(t, map[string]any{"r": map[string]any{"type": "http", "url": as.URL + "/mcp"}})

	for _, format := range []string{"json", "auto", "text"} {
		t.Run(format, func(t *testing.T) {
			env := []string{envTokenStore + "=" + filepath.Join(t.TempDir(), "tokens.json"), "DISPLAY=", "WAYLAND_DISPLAY="}
			authURL, lines, stdout := authLogin(t, cfg, env, "--log-format", format)
			assert.Contains(t, stdout, "authorized r")
			require.NotEmpty(t, lines)
			if format == "text" {
				assert.Contains(t, lines, "  "+authURL, "the URL on a line of its own")
				for _, line := range lines {
					assert.False(t, json.Valid([]byte(line)) && strings.HasPrefix(line, "{"), "a JSON line in text mode: %s", line)
				}
				return
			}
			found := false
			for _, line := range lines {
				var m map[string]any
				require.NoError(t, json.Unmarshal([]byte(line), &m), "every line of stderr is a JSON object: %q", line)
				if m["url"] == authURL {
					found = true
					assert.Equal(t, "info", m["level"])
					assert.Equal(t, "r", m["server"])
				}
			}
			assert.True(t, found, "the URL is a JSON log line's url: %q", lines)
		})
	}
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

// An authorization URL other than http(s) is refused with
// oauth.ErrInsecureEndpoint and shown nowhere; an http(s) one is shown
// in the log format (here without a browser).
func TestAuthURLOpenerRefusesOtherSchemes(t *testing.T) {
	for _, format := range []string{logFormatJSON, logFormatText} {
		var stderr strings.Builder
		o := &output{stderr: &stderr, logFormat: format}
		open := o.authURLOpener(false)
		for _, u := range []string{"file:///etc/passwd", "javascript:alert(1)", "::"} {
			require.ErrorIs(t, open(context.Background(), "r", u), oauth.ErrInsecureEndpoint, u)
		}
		assert.Empty(t, stderr.String(), "a refused URL is shown nowhere")
		require.NoError(t, open(context.Background(), "r", "https://as.example/authorize?x=1"))
		assert.Contains(t, stderr.String(), "https://as.example/authorize?x=1")
		assert.Equal(t, format == logFormatJSON, json.Valid([]byte(stderr.String())), "%s: %s", format, stderr.String())
	}
}

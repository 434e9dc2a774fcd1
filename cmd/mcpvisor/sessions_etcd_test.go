package main

import (
	"encoding/base64"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/etcdtest"
)

// Two gateway replicas share their seal keys and keep their sessions'
// records in a real etcd (--session-store etcd): a session opened on A is
// served by B, and a DELETE sent to B ends it on A too (A asks etcd
// within its recheck period), with the spec's 404.
func TestSuperviseSessionsInEtcd(t *testing.T) {
	endpoint := etcdtest.Start(t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.json")
	secret := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("s", 32)))
	require.NoError(t, os.WriteFile(keys, []byte(`{"keys":[{"secret":"`+secret+`"}]}`), 0o600))
	cfg := writeConfig(t, map[string]any{})
	replica := func() string {
		p := startLogged(t, exec.Command(binPath, "supervise", "--config", cfg, "--listen", "127.0.0.1:0", "--state-dir", sharedStateDir,
			"--session-keys", keys, "--session-store", "etcd", "--etcd-endpoint", endpoint, "--etcd-prefix", "/sessions-test"))
		return gatewayURL(t, p.logs)
	}
	a, b := replica(), replica()

	post := func(base, session, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		resp, err := httpClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	resp := post(a, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"etcd-proof","version":"1"}}}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	id := resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, id)
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	require.Equal(t, http.StatusOK, post(a, id, ping).StatusCode)
	require.Equal(t, http.StatusOK, post(b, id, ping).StatusCode, "B serves A's session")

	req, err := http.NewRequest(http.MethodDelete, b+"/mcp", nil)
	require.NoError(t, err)
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	del, err := httpClient.Do(req)
	require.NoError(t, err)
	del.Body.Close()
	require.Equal(t, http.StatusOK, del.StatusCode)
	require.Equal(t, http.StatusNotFound, post(b, id, ping).StatusCode)
	deadline := time.Now().Add(20 * time.Second)
	for post(a, id, ping).StatusCode != http.StatusNotFound {
		require.True(t, time.Now().Before(deadline), "A still serves the session 20 s after B deleted it")
		time.Sleep(200 * time.Millisecond) // polling A
	}
}

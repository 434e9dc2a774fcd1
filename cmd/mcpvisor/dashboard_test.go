package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// supervise serves the dashboard at / of its listener (and logs its
// link); the dashboard's reload button (POST /admin/reload) re-reads the
// config in supervise's own loop: a new server starts, and a broken
// config is refused with its reason while the running one stays.
// Not parallel: like TestSuperviseReload, its load would slow timing-sensitive tests.
func TestSuperviseDashboardReload(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpvisor")
	copyBinary(t, bin)
	cfg := writeConfig(t, map[string]any{"a": mock(bin, "-name", "a")})
	write := func(content string) {
		tmp := cfg + ".tmp"
		require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
		require.NoError(t, os.Rename(tmp, cfg))
	}
	cmd := exec.Command(bin, "supervise", "--config", cfg, "--listen", "127.0.0.1:0")
	proc := startLogged(t, cmd)
	logs := proc.logs
	base := gatewayURL(t, logs)
	logs.waitFor(t, 10*time.Second, "the dashboard's link", func(lines []map[string]any) bool {
		for _, m := range lines {
			if m["message"] == "gateway listening" {
				return m["dashboard"] == base+"/"
			}
		}
		return false
	})

	res, err := httpClient.Get(base + "/")
	require.NoError(t, err)
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Contains(t, string(page), `<script src="/ui/app.js"`)
	assert.Contains(t, res.Header.Get("Content-Security-Policy"), "script-src 'self'")

	stateOf := func(name string) string {
		r := cli(t, "status", "--url", base, "--json")
		var rep struct {
			Servers []struct{ Name, State string }
		}
		if json.Unmarshal([]byte(r.stdout), &rep) != nil {
			return ""
		}
		for _, s := range rep.Servers {
			if s.Name == name {
				return s.State
			}
		}
		return ""
	}
	reload := func() (int, string) {
		req, err := http.NewRequest(http.MethodPost, base+"/admin/reload", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", base)
		res, err := httpClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	require.Eventually(t, func() bool { return stateOf("a") == "ready" }, 20*time.Second, 50*time.Millisecond)

	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"a": mock(bin, "-name", "a"), "b": mock(bin, "-name", "b")}})
	require.NoError(t, err)
	write(string(b))
	code, body := reload()
	require.Equal(t, http.StatusOK, code, body)
	require.Eventually(t, func() bool { return stateOf("b") == "ready" }, 20*time.Second, 50*time.Millisecond)

	write(`{"mcpServers": [`)
	code, body = reload()
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Contains(t, body, "config reload failed, the running config stays")
	assert.Equal(t, "ready", stateOf("a"))
	assert.Equal(t, "ready", stateOf("b"))

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, proc.wait(t), "log:\n%s", logs)
	assert.True(t, strings.Contains(logs.String(), `"trigger":"dashboard"`), fmt.Sprintf("the reloads logged as the dashboard's:\n%s", logs))
}

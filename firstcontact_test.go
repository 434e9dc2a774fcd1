package mcpvisor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/transports"
)

// embeddingHost is a host written from the README alone: its main never
// calls HelperMain. It runs the bundled mock when asked to (that is how
// mockserver.Command starts it), and otherwise supervises one stdio mock
// server and calls its add tool.
const embeddingHost = `package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
)

func main() {
	if mockserver.IsRequested() {
		os.Exit(mockserver.Main(os.Args[1:]))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{Logger: zerolog.New(os.Stderr)})
	if err != nil {
		fmt.Println("start:", err)
		os.Exit(1)
	}
	defer sup.Close(ctx)
	st, err := sup.Connect(ctx, "calc", mcpvisor.ServerConfig{Config: mockserver.Command()})
	if err != nil {
		fmt.Println("connect:", err)
		os.Exit(1)
	}
	fmt.Println("status:", st.Status, st.Error)
	res, err := sup.Server("calc").CallTool(ctx, "add", map[string]int{"a": 2, "b": 40})
	if err != nil {
		fmt.Println("call:", err)
		os.Exit(1)
	}
	fmt.Println("result:", res.Content[0].Text)
}
`

// A fresh program that embeds mcpvisor and never calls HelperMain starts
// a stdio server and calls its tool: the process helper runs from a
// package init, before the host's main.
func TestAHostWithoutHelperMainStartsStdioServers(t *testing.T) {
	t.Parallel()
	// Inside the module, so that it builds against this checkout; the
	// leading dot keeps it out of ./... patterns meanwhile.
	src, err := os.MkdirTemp(".", ".embedhost-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(src) })
	require.NoError(t, os.WriteFile(filepath.Join(src, "main.go"), []byte(embeddingHost), 0o644))
	bin := filepath.Join(t.TempDir(), "host")
	build := exec.Command("go", "build", "-o", bin, "./"+filepath.Base(src))
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building the host: %s", out)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := exec.CommandContext(ctx, bin)
	run.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	run.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	err = run.Run()
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	assert.Equal(t, "status: connected \nresult: 42\n", stdout.String(), "stderr:\n%s", stderr.String())
}

// syncBuffer is a log sink written by the supervisor's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the JSON log lines written so far.
func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		out = append(out, m)
	}
	return out
}

// A server that fails to connect says why where a host looks: its
// status (Error, which the SDKs' status JSON calls "error", beside
// lastError), and one warning through the host's logger at the level
// a host runs it at, with the reason and no secret of its config.
func TestAFailedServerSaysWhy(t *testing.T) {
	var logs syncBuffer
	ctx := context.Background()
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{Logger: zerolog.New(&logs).Level(zerolog.InfoLevel)})
	require.NoError(t, err)
	defer sup.Close(ctx)

	const secret = "sk-firstcontact-0123456789"
	cfg := mcpvisor.ServerConfig{Config: transports.Config{
		Command: "/nonexistent/mcpvisor-firstcontact-server",
		Env:     map[string]string{"API_KEY": secret},
	}}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := sup.Connect(cctx, "broken", cfg)
	require.NoError(t, err)
	require.Equal(t, mcpvisor.StatusFailed, st.Status)
	require.NotEmpty(t, st.Error, "the status says why")
	assert.Equal(t, st.LastError, st.Error)
	assert.Contains(t, st.Error, "/nonexistent/mcpvisor-firstcontact-server")

	b, err := json.Marshal(st)
	require.NoError(t, err)
	var wire map[string]any
	require.NoError(t, json.Unmarshal(b, &wire))
	assert.Equal(t, st.Error, wire["error"], "the status JSON carries the SDKs' error")
	assert.Equal(t, st.Error, wire["lastError"])

	var warnings []map[string]any
	for _, m := range logs.lines(t) {
		if m["server"] == "broken" && (m["level"] == "warn" || m["level"] == "error") {
			warnings = append(warnings, m)
		}
	}
	require.Len(t, warnings, 1, "one warning for the failure, with its reason: %v", warnings)
	assert.Contains(t, warnings[0]["error"], "/nonexistent/mcpvisor-firstcontact-server")
	assert.Equal(t, "failed", warnings[0]["to"])
	assert.NotEmpty(t, warnings[0]["failure"])

	logs.mu.Lock()
	all := logs.buf.String()
	logs.mu.Unlock()
	assert.NotContains(t, all, secret, "no secret in the log")

	// A ready server's status carries no error.
	ok, err := sup.Connect(cctx, "ok", mcpvisor.ServerConfig{Config: mockserver.Command()})
	require.NoError(t, err)
	require.Equal(t, mcpvisor.StatusConnected, ok.Status)
	assert.Empty(t, ok.Error)
}

// SetResult encodes the errors of the servers it rejected, name to
// message, and decodes them back as messages.
func TestSetResultJSONCarriesErrors(t *testing.T) {
	ctx := context.Background()
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	require.NoError(t, err)
	defer sup.Close(ctx)
	res, err := sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"bad": {Config: transports.Config{Type: transports.TypeStdio}},
		"off": {Config: mockserver.Command(), Disabled: true},
	})
	require.NoError(t, err)
	require.Contains(t, res.Errors, "bad")

	b, err := json.Marshal(res)
	require.NoError(t, err)
	var wire map[string]any
	require.NoError(t, json.Unmarshal(b, &wire))
	assert.Equal(t, map[string]any{"bad": res.Errors["bad"].Error()}, wire["errors"])
	assert.Equal(t, []any{"off"}, wire["added"])

	var back mcpvisor.SetResult
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, res.Added, back.Added)
	require.Contains(t, back.Errors, "bad")
	assert.Equal(t, res.Errors["bad"].Error(), back.Errors["bad"].Error())

	b, err = json.Marshal(mcpvisor.SetResult{Added: []string{"a"}})
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"errors"`, "no errors, no member")
}

// A disabled server needs no command or URL: it is never started, and
// it is shown disabled rather than rejected.
func TestADisabledServerNeedsNoCommand(t *testing.T) {
	ctx := context.Background()
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{})
	require.NoError(t, err)
	defer sup.Close(ctx)
	res, err := sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{
		"off":      {Disabled: true},
		"offstdio": {Config: transports.Config{Type: transports.TypeStdio}, Disabled: true},
	})
	require.NoError(t, err)
	assert.Empty(t, res.Errors)
	assert.Equal(t, []string{"off", "offstdio"}, res.Added)
	for _, name := range []string{"off", "offstdio"} {
		st, err := sup.Server(name).Status()
		require.NoError(t, err)
		assert.Equal(t, mcpvisor.StatusDisabled, st.Status, name)
	}
}

// A server that keeps failing logs one warning when its reconnects start
// and one when it is parked; the attempts between are info.
func TestAFailureEpisodeWarnsOnce(t *testing.T) {
	var logs syncBuffer
	ctx := context.Background()
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{Logger: zerolog.New(&logs).Level(zerolog.InfoLevel)})
	require.NoError(t, err)
	defer sup.Close(ctx)
	cfg := mcpvisor.ServerConfig{
		Config: mockserver.Command("-exit-at-start"),
		Reconnect: mcpvisor.ReconnectPolicy{MaxAttempts: 3,
			InitialDelay: mcpvisor.Duration(10 * time.Millisecond), MaxDelay: mcpvisor.Duration(20 * time.Millisecond)},
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = sup.SetServers(cctx, map[string]mcpvisor.ServerConfig{"flaky": cfg}, mcpvisor.AwaitSettled(20*time.Second))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := sup.Server("flaky").Status()
		return err == nil && st.State == mcpvisor.StateFailed
	}, 20*time.Second, 20*time.Millisecond)

	var warned []string
	reconnects := 0
	for _, m := range logs.lines(t) {
		if m["server"] != "flaky" || m["message"] != "server state" {
			continue
		}
		if m["to"] == "reconnecting" {
			reconnects++
		}
		if m["level"] == "warn" {
			warned = append(warned, fmt.Sprint(m["to"]))
			assert.NotEmpty(t, m["error"], "a warning says why: %v", m)
		}
	}
	assert.Equal(t, 3, reconnects, "three reconnects before it is parked")
	assert.Equal(t, []string{"reconnecting", "failed"}, warned)
}

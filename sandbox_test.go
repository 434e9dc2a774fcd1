package mcpvisor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/internal/interop"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox/sandboxtest"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

// sandboxOptions are the supervisor options of the sandbox tests: a fake
// home directory to hide, short shutdown and backoff delays.
func sandboxOptions(home string) mcpvisor.Options {
	return mcpvisor.Options{
		CloseStdinTimeout: 500 * time.Millisecond,
		TerminateTimeout:  500 * time.Millisecond,
		ConnectTimeout:    20 * time.Second,
		Reconnect: mcpvisor.ReconnectPolicy{InitialDelay: mcpvisor.Duration(50 * time.Millisecond),
			MaxDelay: mcpvisor.Duration(200 * time.Millisecond)},
		Sandbox: sandbox.Options{Home: home},
	}
}

// requireMechanism skips (or, under make test, fails) a test whose
// mechanism this machine lacks.
func requireMechanism(t *testing.T, m transports.SandboxMechanism) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox mechanisms tested here are Linux's")
	}
	var missing string
	switch m {
	case transports.SandboxBwrap:
		if _, err := exec.LookPath("bwrap"); err != nil {
			missing = "bubblewrap is not installed (make test installs it)"
		}
	case transports.SandboxLandlock:
		if !landlockWorks() {
			missing = "this kernel has no Landlock ABI 4 (TCP rules)"
		}
	}
	if missing == "" {
		return
	}
	if os.Getenv("MCPVISOR_REQUIRE_INTEROP") != "" {
		t.Fatal(missing)
	}
	t.Skip(missing)
}

// probeCall calls one of the probe's tools and returns its text and
// whether the tool reported a failure.
func probeCall(t *testing.T, sup *mcpvisor.Supervisor, tool string, args map[string]any) (text string, failed bool, err error) {
	t.Helper()
	return probeCallWithin(t, sup, tool, args, 20*time.Second)
}

// probeCallWithin is probeCall with a deadline of d.
func probeCallWithin(t *testing.T, sup *mcpvisor.Supervisor, tool string, args map[string]any, d time.Duration) (text string, failed bool, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	raw, _ := json.Marshal(args)
	res, err := sup.CallTool(ctx, mcpvisor.QualifiedName("probe", tool), raw)
	if err != nil {
		return "", true, err
	}
	for _, c := range res.Content {
		text += c.Text
	}
	return text, res.IsError, nil
}

// A confined server cannot write outside its write paths, read the home
// directory, connect over TCP, hold a capability, open a raw, UDP or unix
// socket that reaches outside, see another process's environment, signal
// outside its tree, share /dev/shm, or grow past its memory limit; the
// same server unconfined can (raw sockets: as root). Each mechanism
// separately, and auto; TestSandboxProbesUnprivileged runs it as nobody.
func TestSandboxProbes(t *testing.T) {
	bin := probeBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	cases := []struct {
		name      string
		mechanism transports.SandboxMechanism // requested; "" runs unconfined
		want      transports.SandboxMechanism // in effect
		execStage bool                        // through the exec stage, not prlimit
	}{
		{"control", "", "", false},
		{"landlock", transports.SandboxLandlock, transports.SandboxLandlock, false},
		{"bwrap", transports.SandboxBwrap, transports.SandboxBwrap, false},
		{"auto", transports.SandboxAuto, transports.SandboxBwrap, false},
		{"landlock-exec-stage", transports.SandboxLandlock, transports.SandboxLandlock, true},
		{"bwrap-exec-stage", transports.SandboxBwrap, transports.SandboxBwrap, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want != "" {
				requireMechanism(t, tc.want)
			}
			base := t.TempDir()
			home := filepath.Join(base, "home")
			outside := filepath.Join(base, "outside")
			out := filepath.Join(base, "out")
			require.NoError(t, os.MkdirAll(home, 0o755))
			require.NoError(t, os.MkdirAll(outside, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(home, "secret"), []byte("s3cret"), 0o600))

			cfg := mcpvisor.ServerConfig{Config: sandboxtest.Command(bin)}
			confined := tc.mechanism != ""
			require.NoError(t, os.MkdirAll(out, 0o755))
			if confined {
				cfg.Sandbox = &transports.Sandbox{Enabled: true, Write: []string{out}, MemoryMB: 128, Mechanism: tc.mechanism}
			}
			peers := startPeers(t, out)
			ctx := context.Background()
			opts := sandboxOptions(home)
			opts.Sandbox.ExecStage = tc.execStage
			sup, err := mcpvisor.Start(ctx, opts)
			require.NoError(t, err)
			t.Cleanup(func() { sup.Close(context.Background()) })
			events := sup.Subscribe(ctx)
			_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{"probe": cfg}, mcpvisor.AwaitSettled(30*time.Second))
			require.NoError(t, err)
			st := statusOf(sup, "probe")
			require.Equal(t, mcpvisor.StateReady, st.State, "the probe must start: %s", st.LastError)
			assert.Equal(t, tc.want, st.Sandbox, "the status names the mechanism in effect")

			// A write outside the write paths.
			target := filepath.Join(outside, "written")
			text, failed, err := probeCall(t, sup, sandboxtest.ToolWrite, map[string]any{"path": target})
			require.NoError(t, err)
			_, statErr := os.Stat(target)
			if confined {
				assert.True(t, failed, "a write outside the write paths must be denied, got %q", text)
				assert.True(t, errors.Is(statErr, os.ErrNotExist), "and the file must not exist")
			} else {
				assert.False(t, failed, text)
				assert.NoError(t, statErr)
			}

			// A write to a write path works either way.
			allowed := filepath.Join(out, "written")
			text, failed, err = probeCall(t, sup, sandboxtest.ToolWrite, map[string]any{"path": allowed})
			require.NoError(t, err)
			assert.False(t, failed, "the listed write path must be writable: %s", text)
			assert.FileExists(t, allowed)

			// A read of the home directory.
			text, failed, err = probeCall(t, sup, sandboxtest.ToolRead, map[string]any{"path": filepath.Join(home, "secret")})
			require.NoError(t, err)
			if confined {
				assert.True(t, failed, "reading the home directory must be denied")
				assert.NotContains(t, text, "s3cret")
			} else {
				assert.Equal(t, "s3cret", text)
			}

			// A TCP connection to a local listener.
			text, failed, err = probeCall(t, sup, sandboxtest.ToolConnect, map[string]any{"addr": ln.Addr().String()})
			require.NoError(t, err)
			assert.Equal(t, confined, failed, "a TCP connection (confined: %v): %s", confined, text)

			// The private TMPDIR.
			text, _, err = probeCall(t, sup, sandboxtest.ToolEnv, map[string]any{"name": "TMPDIR"})
			require.NoError(t, err)
			if confined {
				require.NotEmpty(t, text, "a confined server gets a TMPDIR")
				text, failed, err = probeCall(t, sup, sandboxtest.ToolWrite, map[string]any{"path": filepath.Join(text, "t")})
				require.NoError(t, err)
				assert.False(t, failed, "its TMPDIR is writable: %s", text)
			}

			// Capabilities, sockets of every family, other processes,
			// /dev/shm.
			probeIsolation(t, sup, confined, home, peers)

			// A large allocation: twice the confined server's limit. Each
			// MiB is touched page by page, and on a loaded machine the
			// unconfined control took 15 to 24 s for 384 MiB: its own
			// deadline is a minute (it only bounds a hang).
			text, failed, err = probeCallWithin(t, sup, sandboxtest.ToolAlloc, map[string]any{"mb": 256}, time.Minute)
			if !confined {
				require.NoError(t, err)
				assert.False(t, failed, text)
				return
			}
			require.Error(t, err, "the hog must be stopped, not answer: %s", text)
			ev := waitEvent(t, events, 20*time.Second, "a server_state event with failure resource-limit", func(e mcpvisor.Event) bool {
				s := serverState(e, "probe")
				return s != nil && s.Failure == mcpvisor.FailureResourceLimit
			}).(*mcpvisor.ServerStateEvent)
			assert.Contains(t, ev.Err, "memory")
			waitEvent(t, events, 20*time.Second, "the probe ready again after the restart", func(e mcpvisor.Event) bool {
				s := serverState(e, "probe")
				return s != nil && s.State == mcpvisor.StateReady
			})
			assert.Equal(t, tc.want, statusOf(sup, "probe").Sandbox, "the restarted server is confined too")
		})
	}
}

// The same as an unprivileged user: bubblewrap through a user namespace,
// no cgroup, the process limit in force.
func TestSandboxProbesUnprivileged(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux")
	}
	stdiotest.RequireRoot(t) // before the build, which RunUnprivileged's skip would waste
	stdiotest.RunUnprivileged(t, "TestSandboxProbes", envProbe+"="+probeBinary(t))
}

// envProbe passes a probe binary to a test run by RunUnprivileged (which
// cannot build one: the build cache is root's).
const envProbe = "MCPVISOR_TEST_PROBE"

// sharedProbe is the probe server that probeBinary builds once for the
// whole test binary (a go build per test cost seconds each: seven tests
// use it), in a directory the user nobody can read, so that
// TestSandboxProbesUnprivileged passes the same binary on. Nothing
// writes to it; TestMain removes the directory (removeSharedProbe).
var sharedProbe struct {
	once     sync.Once
	dir, bin string
	err      error
}

// probeBinary returns the probe server: the one passed (envProbe), or
// the one built once for this test binary.
func probeBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv(envProbe); bin != "" {
		return bin
	}
	sharedProbe.once.Do(func() {
		dir, err := os.MkdirTemp("", "mcpvisor-probe-")
		if err == nil {
			sharedProbe.dir = dir
			err = os.Chmod(dir, 0o755)
		}
		if err == nil {
			sharedProbe.bin, err = sandboxtest.Build(dir)
		}
		sharedProbe.err = err
	})
	require.NoError(t, sharedProbe.err)
	return sharedProbe.bin
}

// removeSharedProbe removes the probe server built by probeBinary, if
// one was; TestMain calls it after the tests.
func removeSharedProbe() {
	if sharedProbe.dir != "" {
		os.RemoveAll(sharedProbe.dir)
	}
}

// waitEvent reads events until one matches, for up to d; failing, it says
// which events it saw.
func waitEvent(t *testing.T, events <-chan mcpvisor.Event, d time.Duration, what string, match func(mcpvisor.Event) bool) mcpvisor.Event {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	var seen []string
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("the event stream ended while waiting for %s; saw:\n%s", what, strings.Join(seen, "\n"))
			}
			if match(e) {
				return e
			}
			b, _ := json.Marshal(e)
			seen = append(seen, fmt.Sprintf("%.400s", b))
		case <-deadline.C:
			t.Fatalf("no %s within %v; saw:\n%s", what, d, strings.Join(seen, "\n"))
		}
	}
}

// No mechanism available (bubblewrap missing from PATH, Landlock
// disabled): the server is failed with the reason, and its command never
// ran.
func TestSandboxUnavailableNeverRunsTheCommand(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux")
	}
	bin := probeBinary(t)
	t.Setenv("PATH", t.TempDir()) // no bwrap
	marker := filepath.Join(t.TempDir(), "ran")

	opts := sandboxOptions(t.TempDir())
	opts.Sandbox.Disable = []transports.SandboxMechanism{transports.SandboxLandlock}
	ctx := context.Background()
	sup, err := mcpvisor.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { sup.Close(context.Background()) })
	cfg := mcpvisor.ServerConfig{Config: sandboxtest.Command(bin, "-marker", marker)}
	cfg.Sandbox = &transports.Sandbox{Enabled: true}
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{"probe": cfg}, mcpvisor.AwaitSettled(30*time.Second))
	require.NoError(t, err)

	st := statusOf(sup, "probe")
	assert.Equal(t, mcpvisor.StateFailed, st.State)
	assert.Equal(t, mcpvisor.FailureSandbox, st.LastFailure)
	assert.Contains(t, st.LastError, "bwrap")
	assert.Contains(t, st.LastError, "landlock: disabled by the host")
	assert.Empty(t, st.Sandbox)
	_, statErr := os.Stat(marker)
	assert.True(t, errors.Is(statErr, os.ErrNotExist), "the command must never have run unconfined")

	// Woken, it fails the same way.
	seq, err := sup.LastSeq(ctx)
	require.NoError(t, err)
	events := sup.Subscribe(ctx, mcpvisor.FromSequence(seq+1))
	require.NoError(t, sup.Server("probe").Reconnect(ctx))
	ev := waitEvent(t, events, 20*time.Second, "the probe failed again", func(e mcpvisor.Event) bool {
		s := serverState(e, "probe")
		return s != nil && s.State == mcpvisor.StateFailed
	}).(*mcpvisor.ServerStateEvent)
	assert.Equal(t, mcpvisor.FailureSandbox, ev.Failure)
	_, statErr = os.Stat(marker)
	assert.True(t, errors.Is(statErr, os.ErrNotExist))
}

// landlockWorks reports whether the kernel's Landlock can deny TCP (ABI
// 4), read from /sys/kernel/security when mounted, else assumed from the
// kernel version.
func landlockWorks() bool {
	data, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return false
	}
	var major, minor int
	parts := strings.SplitN(strings.TrimSpace(string(data)), ".", 3)
	if len(parts) < 2 {
		return false
	}
	for _, c := range parts[0] {
		major = major*10 + int(c-'0')
	}
	for _, c := range parts[1] {
		if c < '0' || c > '9' {
			break
		}
		minor = minor*10 + int(c-'0')
	}
	return major > 6 || major == 6 && minor >= 7
}

// everything returns the path of server-everything's binary (make test
// installs it and sets MCPVISOR_SERVER_EVERYTHING), or skips the test
// (fails it under make test).
func everything(t *testing.T) string {
	t.Helper()
	path := os.Getenv("MCPVISOR_SERVER_EVERYTHING")
	if path != "" {
		if abs, err := filepath.Abs(path); err == nil {
			if _, err := os.Stat(abs); err == nil {
				return abs
			}
		}
	}
	msg := "MCPVISOR_SERVER_EVERYTHING does not name server-everything (make npm-deps installs it)"
	if os.Getenv("MCPVISOR_REQUIRE_INTEROP") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// confinedCall starts one server confined by its config, checks the
// mechanism in effect and calls its echo tool.
func confinedCall(t *testing.T, cfg mcpvisor.ServerConfig, want transports.SandboxMechanism, connect time.Duration) {
	t.Helper()
	ctx := context.Background()
	opts := sandboxOptions("")
	opts.ConnectTimeout = connect
	sup, err := mcpvisor.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { sup.Close(context.Background()) })
	_, err = sup.SetServers(ctx, map[string]mcpvisor.ServerConfig{"everything": cfg}, mcpvisor.AwaitSettled(connect+10*time.Second))
	require.NoError(t, err)
	st := statusOf(sup, "everything")
	require.Equal(t, mcpvisor.StateReady, st.State, "%s", st.LastError)
	assert.Equal(t, want, st.Sandbox)
	callCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := sup.CallTool(callCtx, mcpvisor.QualifiedName("everything", "echo"), json.RawMessage(`{"message":"confined"}`))
	require.NoError(t, err)
	require.NotEmpty(t, res.Content)
	assert.Contains(t, res.Content[0].Text, "confined")
}

// server-everything (Node) starts and answers confined with nothing but
// "sandbox": true and a 512 MiB memory limit, under each mechanism.
func TestServerEverythingConfined(t *testing.T) {
	bin := everything(t)
	for _, m := range []transports.SandboxMechanism{transports.SandboxLandlock, transports.SandboxBwrap} {
		t.Run(string(m), func(t *testing.T) {
			requireMechanism(t, m)
			cfg := mcpvisor.ServerConfig{}
			cfg.Command = bin
			cfg.Sandbox = &transports.Sandbox{Enabled: true, MemoryMB: 512, Mechanism: m}
			confinedCall(t, cfg, m, 30*time.Second)
		})
	}
}

// npxCache returns the npm cache that make npm-deps prepares for npx
// (MCPVISOR_NPX_CACHE: the packuments and tarballs of server-everything
// and its dependencies, nothing installed), or ends the test as a missing
// peer (a failure under make test).
func npxCache(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MCPVISOR_NPX_CACHE")
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, ".prepared")); err == nil {
			return dir
		}
	}
	interop.Missing(t, "MCPVISOR_NPX_CACHE does not name a prepared npm cache (make npm-deps prepares .deps/npx-cache-<version>)")
	return ""
}

// A server launched the way users launch them, `npx -y <package>`, runs
// confined under each mechanism, with node from the system and npm's
// cache on a path the config lets it write. The cache is a fresh copy of
// the one make npm-deps prepares and npx runs offline
// (npm_config_offline) in a sandbox without network: it installs the
// package from the cache into the cache's _npx directory and starts it,
// with no registry in reach. A sandbox that blocked what npx or node need
// fails the start, and so would an npx that tried the registry.
func TestNpxServerConfined(t *testing.T) {
	t.Parallel()
	prepared := npxCache(t)
	if _, err := exec.LookPath("npx"); err != nil {
		interop.Missing(t, "no npx (npm's; make test needs npm)")
	}
	for _, m := range []transports.SandboxMechanism{transports.SandboxAuto, transports.SandboxLandlock} {
		t.Run(string(m), func(t *testing.T) {
			want := m
			if m == transports.SandboxAuto {
				want = transports.SandboxBwrap
				requireMechanism(t, want)
			} else {
				requireMechanism(t, m)
			}
			cache := filepath.Join(t.TempDir(), "npm-cache")
			require.NoError(t, os.CopyFS(cache, os.DirFS(prepared)))
			cfg := mcpvisor.ServerConfig{}
			cfg.Command = "npx"
			cfg.Args = []string{"-y", "@modelcontextprotocol/server-everything@2026.8.31"}
			cfg.Env = map[string]string{
				"npm_config_cache":           cache,
				"npm_config_offline":         "true",
				"npm_config_update_notifier": "false",
			}
			cfg.Sandbox = &transports.Sandbox{Enabled: true, Write: []string{cache}, Mechanism: m}
			confinedCall(t, cfg, want, 60*time.Second)
			installed, err := filepath.Glob(filepath.Join(cache, "_npx", "*", "node_modules",
				"@modelcontextprotocol", "server-everything", "package.json"))
			require.NoError(t, err)
			assert.Len(t, installed, 1, "npx installs server-everything from the copied cache")
		})
	}
}

package mcpvisor

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
)

// What an idle connection costs the host (issue 21): goroutines and
// descriptors per connected, idle server. Each is the difference
// between a supervisor with few servers and the same with more, divided
// by the number added, so that the supervisor's own fixed cost cancels
// out.

const (
	// maxGoroutinesPerIdleStdio and maxFDsPerIdleStdio: a stdio server
	// needs its stdin and stdout (and stderr); its exit and stderr come
	// without a goroutine of their own each.
	maxGoroutinesPerIdleStdio = 2
	maxFDsPerIdleStdio        = 4
	// maxGoroutinesPerIdleHTTP: the GET stream's reader, where the
	// server offers one.
	maxGoroutinesPerIdleHTTP = 1
)

// idleCost is what the process holds at one moment.
type idleCost struct{ goroutines, fds int }

// measureIdle returns the process's goroutines and open descriptors once
// the number of goroutines has stayed the same for a while (connects
// end in goroutines that wind down after the ready state). Idle workers
// of the actors' dispatcher are not counted: at most maxIdleWorkers of
// them are kept, whatever the number of servers.
func measureIdle(t *testing.T) idleCost {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	last, steady := runtime.NumGoroutine(), 0
	for steady < 10 {
		require.True(t, time.Now().Before(deadline), "the number of goroutines did not settle within 10 s (now %d)", last)
		time.Sleep(20 * time.Millisecond)
		if n := runtime.NumGoroutine(); n == last {
			steady++
		} else {
			last, steady = n, 0
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, g := range goroutineKinds() {
		if !strings.Contains(g.where, "actors.(*Dispatcher).worker") {
			n += g.count
		}
	}
	return idleCost{goroutines: n, fds: len(fds)}
}

// goroutineKind is a group of goroutines of the same stack: how many,
// their pprof labels and their first frame outside the runtime.
type goroutineKind struct {
	count         int
	labels, where string
}

func (g goroutineKind) String() string { return fmt.Sprintf("%d × %s %s", g.count, g.where, g.labels) }

// goroutineKinds reads the goroutine profile.
func goroutineKinds() []goroutineKind {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	var out []goroutineKind
	_, text, _ := strings.Cut(b.String(), "\n") // "goroutine profile: total N"
	for _, block := range strings.Split(text, "\n\n") {
		lines := strings.Split(block, "\n")
		var g goroutineKind
		if _, err := fmt.Sscanf(lines[0], "%d @", &g.count); err != nil {
			continue
		}
		for _, l := range lines[1:] {
			if rest, ok := strings.CutPrefix(l, "# labels: "); ok {
				g.labels = rest
			} else if f := strings.Fields(l); g.where == "" && len(f) >= 3 && f[0] == "#" && !strings.HasPrefix(f[2], "runtime.") && !strings.HasPrefix(f[2], "internal/") {
				g.where = f[2]
			}
		}
		out = append(out, g)
	}
	return out
}

// describeGoroutines is goroutineKinds for a failure message.
func describeGoroutines() string {
	var lines []string
	for _, g := range goroutineKinds() {
		lines = append(lines, g.String())
	}
	return strings.Join(lines, "\n")
}

// addIdle connects n more servers named prefix1…prefixN and returns the
// process's cost once they are idle.
func addIdle(t *testing.T, s *Supervisor, servers map[string]ServerConfig, prefix string, n int, cfg func() ServerConfig) idleCost {
	t.Helper()
	for i := range n {
		servers[fmt.Sprintf("%s%d", prefix, i)] = cfg()
	}
	setAndSettle(t, s, servers)
	for name := range servers {
		require.Equal(t, StateReady, statusOf(s, name).State, "server %s", name)
	}
	return measureIdle(t)
}

func TestIdleStdioConnectionCost(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("descriptors are counted in /proc/self/fd")
	}
	s := start(t, testOptions)
	servers := map[string]ServerConfig{}
	const first, more = 4, 20
	before := addIdle(t, s, servers, "a", first, func() ServerConfig { return mock() })
	after := addIdle(t, s, servers, "b", more, func() ServerConfig { return mock() })
	perG := float64(after.goroutines-before.goroutines) / more
	perFD := float64(after.fds-before.fds) / more
	t.Logf("per idle stdio connection: %.2f goroutines, %.2f descriptors", perG, perFD)
	require.LessOrEqual(t, perG, float64(maxGoroutinesPerIdleStdio), "goroutines per idle stdio connection; the process's goroutines:\n%s", describeGoroutines())
	require.LessOrEqual(t, perFD, float64(maxFDsPerIdleStdio), "descriptors per idle stdio connection")
}

// startMockProcess runs the mock server over HTTP in a process of its
// own (its goroutines must not count as the host's) and returns its URL.
func startMockProcess(t *testing.T, args ...string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := mockserver.Command(append([]string{"-transport", mockserver.TransportHTTP, "-listen", addr}, args...)...)
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = os.Environ()
	for k, v := range cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdin, err := cmd.StdinPipe() // the mock serves until its stdin ends
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		testwait.Call(t, "the killed mock's exit", func() { _ = cmd.Wait() })
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return "http://" + addr + "/mcp"
		}
		require.True(t, time.Now().Before(deadline), "the HTTP mock process did not listen on %s within 10 s: %v", addr, err)
		time.Sleep(20 * time.Millisecond)
	}
}

func TestIdleHTTPConnectionCost(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"stateless", nil},
		{"session", []string{"-versions", "2025-11-25"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := startMockProcess(t, tc.args...)
			s := start(t, testOptions)
			servers := map[string]ServerConfig{}
			const first, more = 4, 20
			cfg := func() ServerConfig { return remoteServer(transports.TypeHTTP, url) }
			before := addIdle(t, s, servers, "a", first, cfg)
			after := addIdle(t, s, servers, "b", more, cfg)
			perG := float64(after.goroutines-before.goroutines) / more
			perFD := float64(after.fds-before.fds) / more
			t.Logf("per idle HTTP connection (%s): %.2f goroutines, %.2f descriptors", tc.name, perG, perFD)
			require.LessOrEqual(t, perG, float64(maxGoroutinesPerIdleHTTP), "goroutines per idle HTTP connection; the process's goroutines:\n%s", describeGoroutines())
		})
	}
}

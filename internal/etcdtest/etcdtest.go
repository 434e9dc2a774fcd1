// Package etcdtest starts a real etcd server for tests: one process on
// 127.0.0.1, ports the test picks, data in the test's temporary
// directory, stopped (and waited for) at the end of the test.
package etcdtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Binary is the etcd server the tests run: $MCPVISOR_ETCD, else etcd on
// PATH (Debian's etcd-server package; `make deps` installs it).
func Binary() (string, bool) {
	if b := os.Getenv("MCPVISOR_ETCD"); b != "" {
		return b, true
	}
	b, err := exec.LookPath("etcd")
	return b, err == nil
}

// Start runs an etcd server and returns its client URL. Without an etcd
// binary the test is skipped, unless MCPVISOR_REQUIRE_ETCD is set (make
// test-etcd sets it), when it fails.
func Start(t testing.TB) string {
	t.Helper()
	bin, ok := Binary()
	if !ok {
		if os.Getenv("MCPVISOR_REQUIRE_ETCD") != "" {
			t.Fatal("no etcd binary (make deps installs etcd-server)")
		}
		t.Skip("no etcd binary (make deps installs etcd-server; make test fails without it)")
	}
	// A free port is free only when it is picked: another process (a
	// test beside this one) may take it before etcd binds it. etcd then
	// exits at once, "address already in use": try other ports.
	for attempt := 1; ; attempt++ {
		url, logs, bindRace := start(t, bin)
		switch {
		case url != "":
			return url
		case bindRace && attempt < 3:
			t.Logf("etcd lost its port to another process (attempt %d); trying other ports", attempt)
		default:
			t.Fatalf("etcd did not listen within 20 s; its log:\n%s", logs)
		}
	}
}

// start runs one etcd on two freshly picked ports and returns its client
// URL once it listens; else "", its log, and whether it exited because a
// port was taken meanwhile. The process is killed at the test's end.
func start(t testing.TB, bin string) (url, logs string, bindRace bool) {
	t.Helper()
	client, peer := freePort(t), freePort(t)
	clientURL := "http://127.0.0.1:" + client
	peerURL := "http://127.0.0.1:" + peer
	cmd := exec.Command(bin,
		"--name", "test", "--data-dir", t.TempDir(),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "test="+peerURL, "--initial-cluster-state", "new",
		"--log-level", "warn")
	cmd.Env = append(os.Environ(), "ETCD_UNSUPPORTED_ARCH="+unsupportedArch())
	var tail logTail
	cmd.Stderr = &tail
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting etcd: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Error("etcd did not exit within 10 s of SIGKILL")
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+client, time.Second)
		if err == nil {
			c.Close()
			return clientURL, "", false
		}
		select {
		case <-exited:
			logs = tail.String()
			return "", logs, strings.Contains(logs, "address already in use")
		default:
		}
		if time.Now().After(deadline) {
			return "", tail.String(), false
		}
		time.Sleep(20 * time.Millisecond) // polling the port
	}
}

// unsupportedArch is what etcd 3.4 wants in ETCD_UNSUPPORTED_ARCH on
// the architectures it does not support officially ("" elsewhere).
func unsupportedArch() string {
	if out, err := exec.Command("uname", "-m").Output(); err == nil {
		switch strings.TrimSpace(string(out)) {
		case "aarch64":
			return "arm64"
		}
	}
	return ""
}

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// logTail keeps the last 16 KB written to it.
type logTail struct {
	mu sync.Mutex
	b  []byte
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > 16<<10 {
		l.b = l.b[len(l.b)-16<<10:]
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

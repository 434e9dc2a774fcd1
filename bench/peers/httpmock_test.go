package peers

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
)

// httpMock is one mock server process (mockBin) serving Streamable HTTP,
// both the session eras and the stateless one, on a free loopback port.
// It runs until its stdin ends.
type httpMock struct {
	URL string // the endpoint, http://127.0.0.1:<port>/mcp

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *urlWatcher
	exited chan struct{} // closed when the process has been waited for
	err    error         // the process's exit status; read after exited
}

// httpMockStartTimeout bounds the wait for the server's URL line;
// httpMockStopTimeout the wait for it to exit once its stdin is closed
// (the server gives open requests 2 s).
const (
	httpMockStartTimeout = 10 * time.Second
	httpMockStopTimeout  = 10 * time.Second
)

// startHTTPMock starts a mock server process in HTTP mode and returns once
// it listens. The process is stopped when tb's test or benchmark ends.
func startHTTPMock(tb testing.TB) *httpMock {
	tb.Helper()
	args := append([]string{"-transport", mockserver.TransportHTTP, "-listen", mockserver.DefaultListen}, mockArgs...)
	m := &httpMock{cmd: exec.Command(mockBin, args...), stderr: newURLWatcher(), exited: make(chan struct{})}
	m.cmd.Stderr = m.stderr
	var err error
	if m.stdin, err = m.cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		tb.Fatal("starting the HTTP mock server:", err)
	}
	go func() {
		m.err = m.cmd.Wait()
		close(m.exited)
	}()
	tb.Cleanup(func() {
		if err := m.stop(); err != nil {
			tb.Error(err)
		}
	})
	t := time.NewTimer(httpMockStartTimeout)
	defer t.Stop()
	select {
	case m.URL = <-m.stderr.url:
		return m
	case <-m.exited:
		tb.Fatalf("the HTTP mock server exited before listening (%v): %s", m.err, m.stderr.tail())
	case <-t.C:
		tb.Fatalf("the HTTP mock server did not print its URL within %v: %s", httpMockStartTimeout, m.stderr.tail())
	}
	return nil
}

// stop closes the server's stdin, which makes it shut down gracefully,
// and waits for it to exit (killing it after httpMockStopTimeout).
//
// The peers' idle connections are closed first: a connection dialled for
// a request that then went out on another one has never carried a
// request, and net/http's Shutdown waits for such a connection (up to the
// server's 2 s) as if it were busy.
func (m *httpMock) stop() error {
	peerHTTPClient.CloseIdleConnections()
	m.stdin.Close()
	t := time.NewTimer(httpMockStopTimeout)
	defer t.Stop()
	select {
	case <-m.exited:
		if m.err != nil {
			return fmt.Errorf("HTTP mock server: %v: %s", m.err, m.stderr.tail())
		}
		return nil
	case <-t.C:
		_ = m.cmd.Process.Kill()
		<-m.exited
		return fmt.Errorf("HTTP mock server still running %v after its stdin closed (killed): %s", httpMockStopTimeout, m.stderr.tail())
	}
}

// urlWatcher is the mock server's stderr: it sends the endpoint of the
// mockserver.URLLinePrefix line on url and keeps the last bytes written
// for error messages. os/exec writes to it from one goroutine; tail may
// be called from another.
type urlWatcher struct {
	url chan string

	mu   sync.Mutex
	line []byte // guarded by mu; the line being written, until the URL is found
	last []byte // guarded by mu; the last tailBytes bytes written
	sent bool   // guarded by mu
}

const tailBytes = 2 << 10

func newURLWatcher() *urlWatcher { return &urlWatcher{url: make(chan string, 1)} }

func (w *urlWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = append(w.last, p...)
	if len(w.last) > tailBytes {
		w.last = append(w.last[:0], w.last[len(w.last)-tailBytes:]...)
	}
	if w.sent {
		return len(p), nil
	}
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimSpace(string(w.line[:i]))
		w.line = w.line[i+1:]
		if u, ok := strings.CutPrefix(line, mockserver.URLLinePrefix); ok {
			w.sent, w.line = true, nil
			w.url <- u
			return len(p), nil
		}
	}
}

func (w *urlWatcher) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.last)
}

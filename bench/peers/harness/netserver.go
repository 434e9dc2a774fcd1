package harness

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// NetServer is a child process serving on a loopback port (the mock
// server with an HTTP transport, or the echo floor's HTTP server). It
// runs until its stdin ends.
type NetServer struct {
	URL string // what the process printed after its prefix on stderr

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *urlWatcher
	exited chan struct{} // closed when the process has been waited for
	err    error         // the process's exit status; read after exited
}

// NetServerStartTimeout bounds the wait for the server's URL line;
// NetServerStopTimeout the wait for it to exit once its stdin is closed
// (the mock server gives open requests 2 s).
const (
	NetServerStartTimeout = 10 * time.Second
	NetServerStopTimeout  = 10 * time.Second
)

// StartNetServer starts bin with args and returns once it has written a
// line prefix+URL on stderr.
func StartNetServer(bin, prefix string, args ...string) (*NetServer, error) {
	m := &NetServer{cmd: exec.Command(bin, args...), stderr: newURLWatcher(prefix), exited: make(chan struct{})}
	m.cmd.Stderr = m.stderr
	var err error
	if m.stdin, err = m.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		m.err = m.cmd.Wait()
		close(m.exited)
	}()
	t := time.NewTimer(NetServerStartTimeout)
	defer t.Stop()
	select {
	case m.URL = <-m.stderr.url:
		return m, nil
	case <-m.exited:
		return nil, fmt.Errorf("%s exited before listening (%v): %s", bin, m.err, m.stderr.tail())
	case <-t.C:
		_ = m.cmd.Process.Kill()
		<-m.exited
		return nil, fmt.Errorf("%s did not print its URL within %v: %s", bin, NetServerStartTimeout, m.stderr.tail())
	}
}

// Pid is the server process's id.
func (m *NetServer) Pid() int { return m.cmd.Process.Pid }

// Stop closes the server's stdin, which makes it shut down gracefully,
// and waits for it to exit (killing it after NetServerStopTimeout).
//
// PeerHTTPClient's idle connections are closed first: a connection
// dialled for a request that then went out on another one has never
// carried a request, and net/http's Shutdown waits for such a connection
// (up to the mock server's 2 s) as if it were busy.
func (m *NetServer) Stop() error {
	PeerHTTPClient.CloseIdleConnections()
	m.stdin.Close()
	t := time.NewTimer(NetServerStopTimeout)
	defer t.Stop()
	select {
	case <-m.exited:
		if m.err != nil {
			return fmt.Errorf("%s: %v: %s", m.cmd.Path, m.err, m.stderr.tail())
		}
		return nil
	case <-t.C:
		_ = m.cmd.Process.Kill()
		<-m.exited
		return fmt.Errorf("%s still running %v after its stdin closed (killed): %s", m.cmd.Path, NetServerStopTimeout, m.stderr.tail())
	}
}

// urlWatcher is a server's stderr: it sends the rest of the first line
// starting with prefix on url and keeps the last bytes written for error
// messages. os/exec writes to it from one goroutine; tail may be called
// from another.
type urlWatcher struct {
	prefix string
	url    chan string

	mu   sync.Mutex
	line []byte // guarded by mu; the line being written, until the URL is found
	last []byte // guarded by mu; the last tailBytes bytes written
	sent bool   // guarded by mu
}

const tailBytes = 2 << 10

func newURLWatcher(prefix string) *urlWatcher {
	return &urlWatcher{prefix: prefix, url: make(chan string, 1)}
}

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
		if u, ok := strings.CutPrefix(line, w.prefix); ok {
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

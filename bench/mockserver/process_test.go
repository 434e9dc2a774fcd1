package mockserver

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
)

func TestMain(m *testing.M) {
	if IsRequested() {
		os.Exit(Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// process is a mock server run by Main in a child process.
type process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
	exit  chan error

	mu     sync.Mutex
	stderr []string // guarded by mu: what it wrote besides the URL line
}

// startProcess re-executes the test binary as a mock server with args and
// reads the URL it prints.
func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	cfg := Command(args...)
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = os.Environ()
	for k, v := range cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, stdin: stdin, exit: make(chan error, 1)}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), URLLinePrefix); ok {
				urls <- u
			} else {
				p.mu.Lock()
				p.stderr = append(p.stderr, sc.Text())
				p.mu.Unlock()
			}
		}
		p.exit <- cmd.Wait() // after stderr is drained, as Wait requires
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		testwait.Done(t, p.exit, "the killed mock server's exit (and the end of its stderr)")
		if t.Failed() {
			p.mu.Lock()
			t.Logf("mock server stderr:\n%s", strings.Join(p.stderr, "\n"))
			p.mu.Unlock()
		}
	})
	select {
	case p.url = <-urls:
	case err := <-p.exit:
		t.Fatalf("mock server exited before printing its URL: %v", err)
	case <-time.After(waitFor):
		t.Fatal("no URL line")
	}
	return p
}

// wait returns the process's exit code.
func (p *process) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.exit:
		p.exit <- err // for the cleanup
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(waitFor):
		t.Fatal("mock server did not exit")
		return -1
	}
}

func TestProcess(t *testing.T) {
	for _, tc := range []struct {
		transport, prefix, suffix string
		dial                      func(*testing.T, string) rpcClient
		version                   string
	}{
		{TransportHTTP, "http://127.0.0.1:", "/mcp", dialHTTP, protocol.Version20251125},
		{TransportSSE, "http://127.0.0.1:", "/sse", dialLegacy, protocol.Version20241105},
		{TransportWS, "ws://127.0.0.1:", "/ws", dialWS, protocol.Version20251125},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			p := startProcess(t, "-transport", tc.transport)
			if !strings.HasPrefix(p.url, tc.prefix) || !strings.HasSuffix(p.url, tc.suffix) {
				t.Fatalf("URL %q", p.url)
			}
			c := tc.dial(t, p.url)
			c.request(t, protocol.MethodInitialize, initParams(tc.version))
			c.notify(t, protocol.NotificationInitialized, nil)
			callText(t, c.request(t, protocol.MethodToolsCall, echoParams("x")))
			start := time.Now()
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t); code != 0 {
				t.Fatalf("exit code %d after SIGTERM", code)
			}
			if d := time.Since(start); d > shutdownTimeout+time.Second {
				t.Fatalf("exit took %v", d)
			}
		})
	}
}

func TestProcessStdinEOF(t *testing.T) {
	p := startProcess(t, "-transport", "http")
	p.stdin.Close()
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit code %d after stdin EOF", code)
	}
}

func TestProcessExitAfter(t *testing.T) {
	p := startProcess(t, "-transport", "http", "-exit-after", "1")
	c := dialHTTP(t, p.url).(*httpClient)
	c.request(t, protocol.MethodInitialize, initParams(protocol.Version20251125))
	c.notify(t, protocol.NotificationInitialized, nil)
	callText(t, c.request(t, protocol.MethodToolsCall, echoParams("x")))
	req := encode(t, 10, protocol.MethodToolsCall, echoParams("y"))
	go func() { // aborted: the process exits
		resp, err := postNoFail(c, req)
		if err == nil {
			resp.Body.Close()
		}
	}()
	if code := p.wait(t); code != 3 {
		t.Fatalf("exit code %d, want 3", code)
	}
}

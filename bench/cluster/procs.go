package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// member is one clustermember process.
type member struct {
	index   int
	id      string
	control string
	cmd     *exec.Cmd
	started time.Time // when the process was started
	exited  chan struct{}
}

// event is one line a member prints: its cluster.Event fields, or the
// "started" line with the control address.
type event struct {
	Type    string    `json:"type"`
	Server  string    `json:"server"`
	Member  string    `json:"member"`
	Time    time.Time `json:"time"`
	Control string    `json:"control"`
}

// buildBinaries builds the mcpvisor command (for its mock) and the
// clustermember harness into dir, from the module that holds this
// program.
func buildBinaries(dir string) (mcpvisor, memberBin string, err error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == os.DevNull {
		return "", "", fmt.Errorf("run from inside the mcpvisor module (go env GOMOD: %q, %v)", out, err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	mcpvisor, memberBin = filepath.Join(dir, "mcpvisor"), filepath.Join(dir, "clustermember")
	for bin, pkg := range map[string]string{mcpvisor: "./cmd/mcpvisor", memberBin: "./cluster/internal/clustermember"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build %s: %v: %s", pkg, err, out)
		}
	}
	return mcpvisor, memberBin, nil
}

// startMock starts `mcpvisor mock -transport http` on a free loopback
// port and returns its /mcp URL. The mock serves until its stdin closes;
// stop closes it and waits (SIGKILL after 10 s).
func startMock(bin string, stderrTo io.Writer) (url string, cmd *exec.Cmd, stop func(), err error) {
	port, err := freePort()
	if err != nil {
		return "", nil, nil, err
	}
	cmd = exec.Command(bin, "mock", "-transport", "http", "-listen", fmt.Sprintf("127.0.0.1:%d", port))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, nil, err
	}
	done := make(chan struct{})
	found := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if u, ok := strings.CutPrefix(line, "MCPVISOR_MOCK_URL="); ok {
				select {
				case found <- u:
				default:
				}
				continue
			}
			fmt.Fprintln(stderrTo, line)
		}
		_ = cmd.Wait()
	}()
	stop = func() {
		_ = stdin.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	select {
	case url = <-found:
		return url, cmd, stop, nil
	case <-done:
		return "", nil, nil, fmt.Errorf("the mock exited before it printed its URL")
	case <-time.After(30 * time.Second):
		stop()
		return "", nil, nil, fmt.Errorf("timed out after 30 s waiting for the mock's URL")
	}
}

// startMember starts member i; its events go to events, its stderr to
// stderrTo. It returns once the member printed "started".
func startMember(bin string, i int, args []string, events chan<- event, stderrTo io.Writer) (*member, error) {
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = stderrTo
	m := &member{index: i, cmd: cmd, exited: make(chan struct{}), started: time.Now()}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	go func() {
		defer close(m.exited)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var ev event
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			if ev.Type == "started" {
				m.id, m.control = ev.Member, ev.Control
				close(ready)
				continue
			}
			events <- ev
		}
		_ = cmd.Wait()
	}()
	select {
	case <-ready:
		return m, nil
	case <-m.exited:
		return nil, fmt.Errorf("member %d exited before it started", i)
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("timed out after 60 s waiting for member %d to start", i)
	}
}

// kill sends SIGKILL and waits up to 10 s for the process to end.
func (m *member) kill() error {
	_ = m.cmd.Process.Kill()
	select {
	case <-m.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("member %d (pid %d) did not exit within 10 s of SIGKILL", m.index, m.cmd.Process.Pid)
	}
}

// post sends body as JSON to the member's control API and decodes the
// answer into out.
func (m *member) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+m.control+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	return do(req, out)
}

// get decodes the member's answer to GET path into out.
func (m *member) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.control+path, nil)
	if err != nil {
		return err
	}
	return do(req, out)
}

func do(req *http.Request, out any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// freePort returns a loopback port that was free a moment ago, below
// Linux's ephemeral range (32768–60999): a port the kernel hands out for
// ":0" may be taken by one of the benchmark's 10,000 outgoing
// connections before the member binds it (internal/testports does the
// same for tests).
func freePort() (int, error) {
	for range 1000 {
		p := 20000 + rand.IntN(12768)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free loopback port in [20000, 32768) after 1000 tries")
}

// procStatus reads a "kB" field of /proc/<pid>/status (VmRSS, VmHWM) in
// bytes.
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100
// on every Linux the project runs on).
const clockTicks = 100

// procCPU is the process's user+system CPU time so far.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %v %v", pid, err1, err2)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// procIO is the bytes the process read and wrote through syscalls
// (sockets included): rchar and wchar of /proc/<pid>/io.
func procIO(pid int) (rchar, wchar int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			rchar, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			wchar, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return rchar, wchar, nil
}

// openFiles is the number of the process's open descriptors.
func openFiles(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}

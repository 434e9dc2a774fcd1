//go:build windows

package stdio

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/windows"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
)

// roleVar selects what the test binary does when a test starts it as a
// server (or as a supervisor) instead of running the tests.
const roleVar = "MCPVISOR_STDIO_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleVar) {
	case "":
		os.Exit(m.Run())
	case "echo": // first frame: its arguments; then echoes lines
		args, _ := json.Marshal(os.Args[1:])
		fmt.Printf("{\"args\":%s}\n", args)
		echo()
	case "spawner": // starts a sleeper, says its pid, then echoes
		child := sleeper()
		fmt.Printf("{\"child\":%d}\n", child)
		echo()
	case "crasher": // starts a sleeper, says its pid, exits
		child := sleeper()
		fmt.Printf("{\"child\":%d}\n", child)
		os.Exit(3)
	case "sleeper":
		time.Sleep(5 * time.Minute) // testwait:ok a helper process that waits to be killed
	case "supervisor": // dials a spawner, says the grandchild's pid, waits to be killed
		rec := newRecorder()
		self, _ := os.Executable()
		_, err := Dial(context.Background(), transports.Config{Command: self, Env: map[string]string{roleVar: "spawner"}}, Options{}, rec)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		select {
		case <-rec.gotFrame:
		case <-time.After(20 * time.Second):
			fmt.Println("error: no frame from the spawner")
			os.Exit(1)
		}
		rec.mu.Lock()
		fmt.Println(rec.frames[0])
		rec.mu.Unlock()
		time.Sleep(5 * time.Minute) // testwait:ok a helper process that waits to be killed
	}
	os.Exit(0)
}

func echo() {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fmt.Println(sc.Text())
	}
}

func sleeper() int {
	self, _ := os.Executable()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), roleVar+"=sleeper")
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return cmd.Process.Pid
}

// openProcess opens pid for waiting, so that a later check is about this
// process even if its pid were reused.
func openProcess(t *testing.T, pid int) windows.Handle {
	t.Helper()
	h, err := windows.OpenProcess(windows.SYNCHRONIZE, false, uint32(pid))
	require.NoError(t, err, "opening process %d", pid)
	t.Cleanup(func() { windows.CloseHandle(h) })
	return h
}

// requireExits waits (bounded) for the process behind h to end.
func requireExits(t *testing.T, h windows.Handle, what string) {
	t.Helper()
	ev, err := windows.WaitForSingleObject(h, 10_000)
	require.NoError(t, err)
	require.Equal(t, uint32(windows.WAIT_OBJECT_0), ev, "%s is still running 10 s later", what)
}

func childPid(t *testing.T, frame string) int {
	t.Helper()
	var v struct{ Child int }
	require.NoError(t, json.Unmarshal([]byte(frame), &v), frame)
	require.NotZero(t, v.Child, frame)
	return v.Child
}

func dialRole(t *testing.T, role string, cfg transports.Config) (*Conn, *recorder) {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	if cfg.Command == "" {
		cfg.Command = self
	}
	if cfg.Env == nil {
		cfg.Env = map[string]string{}
	}
	cfg.Env[roleVar] = role
	rec := newRecorder()
	c, err := Dial(context.Background(), cfg, Options{CloseStdinTimeout: time.Second}, rec)
	require.NoError(t, err)
	return c, rec
}

func closeConn(t *testing.T, c *Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	require.NoError(t, c.Close(ctx))
}

// Close ends the server and what it started: the job goes with it.
func TestJobEndsTheTreeOnClose(t *testing.T) {
	c, rec := dialRole(t, "spawner", transports.Config{})
	child := childPid(t, rec.waitFrames(t, 1)[0])
	h := openProcess(t, child)
	require.NoError(t, c.Send(context.Background(), []byte(`{"ping":1}`)))
	assert.Equal(t, `{"ping":1}`, rec.waitFrames(t, 2)[1], "the pipes carry frames both ways")
	closeConn(t, c)
	requireExits(t, h, "the server's child after Close")
}

// A server that crashes leaves its child in the job; the teardown that
// follows ends it.
func TestJobEndsWhatACrashedServerLeft(t *testing.T) {
	c, rec := dialRole(t, "crasher", transports.Config{})
	child := childPid(t, rec.waitFrames(t, 1)[0])
	h := openProcess(t, child)
	var pe *ProcessExitError
	require.ErrorAs(t, rec.waitClosed(t), &pe)
	assert.Equal(t, 3, pe.ExitCode)
	closeConn(t, c)
	requireExits(t, h, "the crashed server's child")
}

// When the supervisor itself dies, the system closes its job handles and
// kill-on-close ends every server and its children.
func TestJobEndsTheTreeWhenTheSupervisorDies(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	sup := exec.Command(self)
	sup.Env = append(os.Environ(), roleVar+"=supervisor")
	out, err := sup.StdoutPipe()
	require.NoError(t, err)
	sup.WaitDelay = time.Second
	require.NoError(t, sup.Start())
	t.Cleanup(func() {
		_ = sup.Process.Kill()
		_ = testwait.Result(t, "the exit of the supervisor process", sup.Wait)
	})
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- line
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(30 * time.Second):
		t.Fatal("the supervisor process did not report its server's child")
	}
	child := childPid(t, strings.TrimSpace(line))
	h := openProcess(t, child)
	require.NoError(t, sup.Process.Kill()) // TerminateProcess: no cleanup runs
	requireExits(t, h, "a server's child after its supervisor was killed")
}

// "npx" in an .mcp.json written on Linux finds npx.cmd: a bare name is
// looked up with the server's PATH and PATHEXT, and a batch file runs
// through cmd.exe with every argument passed as written.
func TestBatchFileServerFoundThroughPathext(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	script := "@\"" + self + "\" %*\r\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mcpshim.cmd"), []byte(script), 0o600))
	args := []string{"plain", "two words", "a&b|c", "50%", "%PATH%", `say "hi"`, "", `C:\dir\`, "a!b", "(x)"}
	path := dir + ";" + os.Getenv("PATH")
	c, rec := dialRole(t, "echo", transports.Config{Command: "mcpshim", Args: args,
		Env: map[string]string{"PATH": path, "PATHEXT": ".COM;.EXE;.BAT;.CMD"}})
	defer closeConn(t, c)
	var got struct{ Args []string }
	require.NoError(t, json.Unmarshal([]byte(rec.waitFrames(t, 1)[0]), &got))
	assert.Equal(t, args, got.Args, "the server reads its arguments as they were configured")

	_, err = Dial(context.Background(), transports.Config{Command: "mcpshim", Args: []string{"line\nbreak"},
		Env: map[string]string{"PATH": path}}, Options{}, newRecorder())
	assert.ErrorIs(t, err, ErrBatchArgument)
	var ee *exec.Error
	assert.ErrorAs(t, err, &ee, "a refused argument is a configuration error")
}

// A command that is nowhere on the server's PATH is an *exec.Error.
func TestMissingCommandIsNotFound(t *testing.T) {
	_, err := Dial(context.Background(), transports.Config{Command: "no-such-mcp-server-" + strconv.Itoa(os.Getpid())}, Options{}, newRecorder())
	assert.ErrorIs(t, err, exec.ErrNotFound)
}

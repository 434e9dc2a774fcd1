package reaper

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

// TestMain serves the helper modes; goleak checks that the host's side
// of a stopped helper leaves no goroutine.
func TestMain(m *testing.M) {
	HelperMain()
	goleak.VerifyTestMain(m)
}

// devNull returns three descriptors a server can be started with.
func devNull(t *testing.T) Request { return devNullB(t) }

func devNullB(t testing.TB) Request {
	t.Helper()
	in, err := os.Open(os.DevNull)
	require.NoError(t, err)
	out, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { in.Close(); out.Close() })
	return Request{Env: os.Environ(), Stdin: in, Stdout: out, Stderr: out}
}

// Without the helper (withdrawn here; the package's init installs it in
// every program), nothing is started, typed.
func TestSpawnNeedsTheHelper(t *testing.T) {
	installed.Store(false)
	defer installed.Store(true)
	req := devNull(t)
	req.Path, req.Argv = "/bin/true", []string{"true"}
	_, err := Spawn(context.Background(), req)
	require.ErrorIs(t, err, ErrNotInstalled)
}

// A start that fails says why, typed: a missing executable matches
// fs.ErrNotExist; a sandbox the exec stage cannot apply matches
// sandbox.ErrUnavailable.
func TestSpawnErrorsAreTyped(t *testing.T) {
	req := devNull(t)
	req.Path, req.Argv = "/nonexistent/server", []string{"server"}
	_, err := Spawn(context.Background(), req)
	require.ErrorIs(t, err, fs.ErrNotExist)

	req = devNull(t)
	req.Path, req.Argv = "/bin/true", []string{"true"}
	// A ruleset that handles rights no kernel knows: Landlock refuses it.
	req.Confine = &sandbox.Plan{Mechanism: transports.SandboxLandlock, Path: "/bin/true", Argv: []string{"true"},
		Landlock: &sandbox.Ruleset{HandledFS: 1 << 62}}
	_, err = Spawn(context.Background(), req)
	require.ErrorIs(t, err, sandbox.ErrUnavailable)
	assert.Contains(t, err.Error(), "landlock_create_ruleset")

	// The same without the exec stage: the reaper's thread refuses it.
	req = devNull(t)
	req.Confine = &sandbox.Plan{Mechanism: transports.SandboxLandlock, Path: "/bin/true", Argv: []string{"true"},
		Landlock: &sandbox.Ruleset{HandledFS: 1 << 62}, Direct: true}
	_, err = Spawn(context.Background(), req)
	require.ErrorIs(t, err, sandbox.ErrUnavailable)
	assert.Contains(t, err.Error(), "landlock_create_ruleset")
}

// A server confined by Landlock without the exec stage is started from a
// thread of the reaper's own that its domain confines; the thread ends
// once the server has exited (none is left behind per server), and the
// reaper itself stays unconfined: it still starts servers that read what
// the confined ones may not.
func TestDirectLandlockThreadsEnd(t *testing.T) {
	release := Hold()
	defer release()
	// Landlock ABI 4 denies TCP, as a server without network needs.
	if abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION); errno != 0 || abi < 4 {
		t.Skip("this kernel has no Landlock ABI 4")
	}
	plan, err := sandbox.Prepare(&transports.Sandbox{Enabled: true, Mechanism: transports.SandboxLandlock},
		sandbox.Command{Path: "/bin/true", Argv: []string{"true"}, Dir: "/"}, sandbox.Options{})
	require.NoError(t, err)
	defer plan.Cleanup()
	if !plan.Direct {
		// Whether prlimit is installed is asked of the file system, not of
		// Prepare (under test): with it, a plan that is not direct fails.
		_, usr := os.Stat("/usr/bin/prlimit")
		_, bin := os.Stat("/bin/prlimit")
		require.True(t, usr != nil && bin != nil, "prlimit is installed, and the plan is not direct")
		require.Empty(t, os.Getenv("MCPVISOR_REQUIRE_INTEROP"), "util-linux's prlimit is not installed (make deps installs it)")
		t.Skip("util-linux's prlimit is not installed: the exec stage confines")
	}
	start := func(req Request) *Process {
		t.Helper()
		p, err := Spawn(context.Background(), req)
		require.NoError(t, err)
		testwait.Done(t, p.Done(), "the server to exit")
		_, err = p.Release(context.Background(), 100*time.Millisecond)
		require.NoError(t, err)
		return p
	}
	req := devNull(t)
	req.Path, req.Argv = "/bin/true", []string{"true"}
	start(req) // the reaper runs
	global.mu.Lock()
	reaperPid := global.h.pid
	global.mu.Unlock()
	before := threadsOf(t, reaperPid)
	for range 20 {
		req := devNull(t)
		req.Path, req.Argv, req.Confine = plan.Path, plan.Argv, plan
		start(req)
	}
	deadline := time.Now().Add(10 * time.Second)
	for threadsOf(t, reaperPid) > before+2 {
		if time.Now().After(deadline) {
			t.Fatalf("the reaper has %d threads after 20 confined servers came and went, %d before: the confining threads must end",
				threadsOf(t, reaperPid), before)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Unconfined, a server still reads the home directory's files.
	home, err := os.UserHomeDir()
	require.NoError(t, err)
	marker := filepath.Join(t.TempDir(), "read")
	req = devNull(t)
	req.Path, req.Argv = "/bin/sh", []string{"sh", "-c", "ls " + home + " >/dev/null && touch " + marker}
	start(req)
	assert.FileExists(t, marker, "the reaper must not be confined by a server's domain")
}

// threadsOf counts the threads of process pid.
func threadsOf(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	require.NoError(t, err)
	return len(entries)
}

// A server's exit is reported with its status, after its start.
func TestExitStatus(t *testing.T) {
	req := devNull(t)
	req.Path, req.Argv = "/bin/sh", []string{"sh", "-c", "exit 7"}
	p, err := Spawn(context.Background(), req)
	require.NoError(t, err)
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the exit of sh -c 'exit 7' was not reported within 10 s")
	}
	ws, err := p.Status()
	require.NoError(t, err)
	assert.Equal(t, 7, ws.ExitStatus())
	left, err := p.Release(context.Background(), 100*time.Millisecond)
	require.NoError(t, err)
	assert.Zero(t, left)
}

// AfterExit's function runs once the exit is reported, with its status
// valid, and at once when the exit was reported before it was set.
func TestAfterExit(t *testing.T) {
	req := devNull(t)
	req.Path, req.Argv = "/bin/sh", []string{"sh", "-c", "read x; exit 5"}
	r, w, err := os.Pipe()
	require.NoError(t, err)
	req.Stdin = r
	p, err := Spawn(context.Background(), req)
	require.NoError(t, err)
	r.Close()
	statuses := make(chan int, 2)
	p.AfterExit(func() {
		ws, err := p.Status()
		assert.NoError(t, err)
		statuses <- ws.ExitStatus()
	})
	select {
	case <-statuses:
		t.Fatal("AfterExit's function ran before the server exited")
	default:
	}
	w.Close() // sh reads EOF and exits
	select {
	case code := <-statuses:
		assert.Equal(t, 5, code)
	case <-time.After(10 * time.Second):
		t.Fatal("AfterExit's function did not run within 10 s of the exit")
	}
	ran := false
	p.AfterExit(func() { ran = true })
	assert.True(t, ran, "AfterExit after the exit runs its function at once")
	_, err = p.Release(context.Background(), 100*time.Millisecond)
	require.NoError(t, err)
}

// A start whose caller gives up waiting ends by the caller's deadline,
// and the server, started anyway, is ended: nothing is left behind.
func TestSpawnHonoursItsContext(t *testing.T) {
	release := Hold()
	defer release()
	// A first server starts the helper.
	req := devNull(t)
	req.Path, req.Argv = "/bin/true", []string{"true"}
	p, err := Spawn(context.Background(), req)
	require.NoError(t, err)
	testwait.Done(t, p.Done(), "the exit of /bin/true")
	_, err = p.Release(context.Background(), 0)
	require.NoError(t, err)

	// A server whose caller has given up before the start is answered.
	tag := "MCPVISOR_ABANDON_TEST=" + strconv.FormatInt(time.Now().UnixNano(), 36)
	req = devNull(t)
	req.Path, req.Argv = "/bin/sleep", []string{"sleep", "1000"}
	req.Env = append(req.Env, tag)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Spawn(ctx, req)
	require.ErrorIs(t, err, context.Canceled)
	// The reaper serves requests in order: once a later start is
	// answered, the abandoned one was forked.
	req = devNull(t)
	req.Path, req.Argv = "/bin/true", []string{"true"}
	p, err = Spawn(context.Background(), req)
	require.NoError(t, err)
	testwait.Done(t, p.Done(), "the exit of /bin/true")
	_, err = p.Release(context.Background(), 0)
	require.NoError(t, err)
	assert.Empty(t, stdiotest.Eventually(5*time.Second, func() []int { return stdiotest.WithEnv(tag) }),
		"the server whose caller gave up is ended")
}

// A reaper killed with SIGKILL leaves its cgroup directory, and whatever
// its servers' descendants were doing in it; the next reaper ends those
// and removes the directory.
func TestStaleCgroupsAreSwept(t *testing.T) {
	// What this machine offers is asked of the kernel, not of the reaper's
	// own functions (under test): a regression there fails.
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	if !strings.Contains(string(mountinfo), " - cgroup2 ") {
		t.Skip("no cgroup v2 hierarchy is mounted")
	}
	own, err := ownCgroupDir()
	require.NoError(t, err, "a cgroup v2 hierarchy is mounted")
	if err := unix.Access(own, unix.W_OK); err != nil {
		t.Skip("this user may not write the cgroup hierarchy (make test runs this as root):", err)
	}
	// A dead reaper's directory: a pid no process has (the kernel's pid
	// limit), with a server's cgroup still holding a process.
	stale := filepath.Join(own, cgroupPrefix+"4194305")
	server := filepath.Join(stale, "s1")
	t.Cleanup(func() { os.Remove(server); os.Remove(stale) })
	leftover := exec.Command("sleep", "1000")
	require.NoError(t, leftover.Start())
	exited := make(chan error, 1)
	go func() { exited <- leftover.Wait() }()
	// Any reaper on the machine (another test binary's) may sweep the
	// stale directory while it is still empty, between its creation and
	// the move of the leftover into it (1 run in 20 of make flake's cover
	// row, beside other packages' reapers): make it again then.
	for attempt := 0; ; attempt++ {
		if err := os.MkdirAll(server, 0o755); err != nil {
			leftover.Process.Kill()
			t.Fatal("making a cgroup in a hierarchy this user may write:", err)
		}
		err := os.WriteFile(filepath.Join(server, "cgroup.procs"), []byte(strconv.Itoa(leftover.Process.Pid)), 0)
		if err == nil {
			break
		}
		require.ErrorIs(t, err, os.ErrNotExist, "moving the leftover into the stale cgroup")
		require.Less(t, attempt, 100, "the stale cgroup was swept before the leftover could be moved in, 100 times")
	}

	// A new reaper (a first server) sweeps it.
	release := Hold()
	defer release()
	req := devNull(t)
	req.Path, req.Argv = "/bin/true", []string{"true"}
	p, err := Spawn(context.Background(), req)
	require.NoError(t, err)
	testwait.Done(t, p.Done(), "the exit of /bin/true")
	_, err = p.Release(context.Background(), 0)
	require.NoError(t, err)

	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		leftover.Process.Kill()
		t.Fatal("the leftover of a dead reaper still runs 10 s after a new reaper started")
	}
	_, err = os.Stat(stale)
	assert.True(t, os.IsNotExist(err), "the dead reaper's directory is removed")
}

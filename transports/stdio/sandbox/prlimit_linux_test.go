package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Where util-linux's prlimit is installed, a plan is direct: prlimit sets
// the limits (soft and hard alike) and executes the server, inside
// bubblewrap for bwrap; with ExecStage (or without prlimit) the plan goes
// through the exec stage as before.
func TestPrepareDirectPlans(t *testing.T) {
	if !prlimitInstalled(t) {
		t.Skip("util-linux's prlimit is not installed")
	}
	require.NotEmpty(t, findPrlimit(), "prlimit is installed")
	cmd := Command{Path: "/bin/cat", Argv: []string{"cat", "-u"}, Dir: "/"}
	cfg := &transports.Sandbox{Enabled: true, MemoryMB: 64, OpenFiles: 100}
	// The last limits (an unprivileged user's --nproc comes first).
	limits := []string{"--nofile=100:100", "--data=" + strconv.Itoa(64<<20) + ":" + strconv.Itoa(64<<20), "--"}

	// Whether this kernel can deny TCP by Landlock (ABI 4) is asked of the
	// kernel itself, not of checkLandlock: a regression there fails.
	if abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION); errno != 0 || abi < 4 {
		t.Skip("this kernel has no Landlock ABI 4")
	}
	require.NoError(t, checkLandlock(false), "the kernel has Landlock ABI 4")
	cfg.Mechanism = transports.SandboxLandlock
	p, err := Prepare(cfg, cmd, Options{})
	require.NoError(t, err)
	defer p.Cleanup()
	assert.True(t, p.Direct)
	assert.Equal(t, findPrlimit(), p.Path)
	sep := slices.Index(p.Argv, "--")
	require.Positive(t, sep)
	assert.Equal(t, limits, p.Argv[sep-2:sep+1])
	assert.Equal(t, []string{"/bin/cat", "-u"}, p.Argv[sep+1:], "the server follows prlimit's --")
	assert.NotNil(t, p.Landlock, "the reaper's thread applies the ruleset")

	p, err = Prepare(cfg, cmd, Options{ExecStage: true})
	require.NoError(t, err)
	defer p.Cleanup()
	assert.False(t, p.Direct)
	assert.Equal(t, "/bin/cat", p.Path)
	assert.Equal(t, []string{"cat", "-u"}, p.Argv)

	// Whether bubblewrap can run here is asked of bwrap itself, with a
	// sandbox of the namespaces a server gets, not of checkBwrap (the code
	// under test): a regression there fails.
	if why := bwrapCannotRun(); why != "" {
		t.Skip(why)
	}
	require.NoError(t, checkBwrap(&Options{}), "bubblewrap runs here")
	cfg.Mechanism = transports.SandboxBwrap
	p, err = Prepare(cfg, cmd, Options{})
	require.NoError(t, err)
	defer p.Cleanup()
	assert.True(t, p.Direct)
	assert.Equal(t, "bwrap", p.Argv[0][len(p.Argv[0])-5:], "bubblewrap is started directly")
	sep = slices.Index(p.Argv, "--")
	assert.Equal(t, findPrlimit(), p.Argv[sep+1], "prlimit runs inside it")
	assert.Equal(t, []string{"/bin/cat", "-u"}, p.Argv[len(p.Argv)-2:])
}

// bwrapCannotRun says why bubblewrap cannot run on this machine ("" when
// it can): not installed (a failure under make test, which installs it),
// or a trial sandbox refused (an AppArmor policy against unprivileged
// user namespaces, a kernel without them).
func bwrapCannotRun() string {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		if os.Getenv("MCPVISOR_REQUIRE_INTEROP") != "" {
			return "" // the code under test then fails, and says why
		}
		return "bubblewrap is not installed (make test installs it)"
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Patience)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
		"--dev", "/dev", "--proc", "/proc", "--", "/bin/true").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("bubblewrap cannot make a sandbox here: %v: %s", err, out)
	}
	return ""
}

// prlimitInstalled reports whether util-linux's prlimit is on this
// machine, asked of the file system rather than of findPrlimit (under
// test); under make test (MCPVISOR_REQUIRE_INTEROP), which installs it,
// its absence fails.
func prlimitInstalled(t *testing.T) bool {
	t.Helper()
	for _, p := range []string{"/usr/bin/prlimit", "/bin/prlimit"} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	if os.Getenv("MCPVISOR_REQUIRE_INTEROP") != "" {
		t.Fatal("util-linux's prlimit is not installed (make deps installs it)")
	}
	return false
}

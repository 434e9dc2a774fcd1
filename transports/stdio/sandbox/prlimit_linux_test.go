package sandbox

import (
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/transports"
)

// Where util-linux's prlimit is installed, a plan is direct: prlimit sets
// the limits (soft and hard alike) and executes the server, inside
// bubblewrap for bwrap; with ExecStage (or without prlimit) the plan goes
// through the exec stage as before.
func TestPrepareDirectPlans(t *testing.T) {
	if findPrlimit() == "" {
		t.Skip("util-linux's prlimit is not installed")
	}
	cmd := Command{Path: "/bin/cat", Argv: []string{"cat", "-u"}, Dir: "/"}
	cfg := &transports.Sandbox{Enabled: true, MemoryMB: 64, OpenFiles: 100}
	// The last limits (an unprivileged user's --nproc comes first).
	limits := []string{"--nofile=100:100", "--data=" + strconv.Itoa(64<<20) + ":" + strconv.Itoa(64<<20), "--"}

	if err := checkLandlock(false); err != nil {
		t.Skip("this kernel cannot confine by Landlock:", err)
	}
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

	if err := checkBwrap(&Options{}); err != nil {
		t.Skip("bubblewrap cannot run here:", err)
	}
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

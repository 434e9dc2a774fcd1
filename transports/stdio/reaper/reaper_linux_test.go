package reaper

import (
	"context"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/sandbox"
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

// Without HelperMain, nothing is started: the error says what to do.
func TestSpawnNeedsHelperMain(t *testing.T) {
	installed.Store(false)
	defer installed.Store(true)
	req := devNull(t)
	req.Path, req.Argv = "/bin/true", []string{"true"}
	_, err := Spawn(context.Background(), req)
	require.ErrorIs(t, err, ErrNotInstalled)
	assert.Contains(t, err.Error(), "mcpvisor.HelperMain()")
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

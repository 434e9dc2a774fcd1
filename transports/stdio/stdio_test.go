//go:build unix

package stdio

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/stdio/stdiotest"
)

func sh(script string) transports.Config {
	return transports.Config{Command: "/bin/sh", Args: []string{"-c", script}}
}

func dial(t *testing.T, cfg transports.Config, opts Options) (*Conn, *recorder) {
	t.Helper()
	rec := newRecorder()
	c, err := Dial(testwait.Context(t), cfg, opts, rec)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(ctx)
		assert.Empty(t, stdiotest.WaitGroupGone(c.Pid(), 2*time.Second), "process group must be empty after Close")
	})
	return c, rec
}

func TestFramesRoundTripThroughASubprocess(t *testing.T) {
	c, rec := dial(t, transports.Config{Command: "cat"}, Options{})
	ctx := testwait.Context(t)
	big := `{"big":"` + strings.Repeat("x", 300<<10) + `"}` // several read buffers long
	for _, f := range []string{`{"a":1}`, big, `{"b":2}`} {
		require.NoError(t, c.Send(ctx, []byte(f)))
	}
	frames := rec.waitFrames(t, 3)
	assert.Equal(t, []string{`{"a":1}`, big, `{"b":2}`}, frames, "frames arrive whole and in order")
}

func TestConcurrentSendsNeverInterleave(t *testing.T) {
	c, rec := dial(t, transports.Config{Command: "cat"}, Options{})
	const writers, each = 8, 50
	payload := strings.Repeat("y", 100<<10) // > PIPE_BUF, so a torn write would show
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				assert.NoError(t, c.Send(testwait.Context(t), []byte(`{"w":`+string(rune('0'+w))+`,"p":"`+payload+`"}`)))
			}
		}()
	}
	testwait.Call(t, "every writer to finish", wg.Wait)
	for _, f := range rec.waitFrames(t, writers*each) {
		require.True(t, strings.HasPrefix(f, `{"w":`) && strings.HasSuffix(f, `"}`) && len(f) == len(payload)+14, "torn frame of %d bytes", len(f))
	}
}

func TestOversizeFrameIsDroppedAndReportedNotFatal(t *testing.T) {
	big := strings.Repeat("z", 5000)
	script := `printf '{"jsonrpc":"2.0","id":41,"result":"` + big + `"}\n{"small":1}\n'; cat >/dev/null`
	_, rec := dial(t, sh(script), Options{MaxFrameSize: 1024})
	rec.waitFrames(t, 2)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.frameErrs, 1)
	var tooBig *transports.FrameTooLargeError
	require.ErrorAs(t, rec.frameErrs[0], &tooBig)
	assert.Equal(t, int64(1024), tooBig.Limit)
	assert.Greater(t, tooBig.Size, int64(5000))
	assert.True(t, strings.HasPrefix(string(tooBig.Prefix), `{"jsonrpc":"2.0","id":41`), "the prefix keeps the id")
	assert.Equal(t, []string{`{"small":1}`}, rec.frames, "the next frame still arrives")
}

func TestLineEndingsAndAMissingFinalNewline(t *testing.T) {
	_, rec := dial(t, sh(`printf '{"a":1}\r\n\n   \n{"b":2}'`), Options{})
	assert.Equal(t, []string{`{"a":1}`, `{"b":2}`}, rec.waitFrames(t, 2))
	rec.waitClosed(t)
}

func TestEnvIsMergedOverTheHostAndCwdIsUsed(t *testing.T) {
	t.Setenv("MCPVISOR_HOST_VAR", "from-host")
	dir := t.TempDir()
	cfg := sh(`printf '{"host":"%s","own":"%s","dir":"%s"}\n' "$MCPVISOR_HOST_VAR" "$OWN" "$(pwd)"`)
	cfg.Env = map[string]string{"OWN": "mine"}
	cfg.Cwd = dir
	_, rec := dial(t, cfg, Options{})
	frames := rec.waitFrames(t, 1)
	assert.JSONEq(t, `{"host":"from-host","own":"mine","dir":"`+dir+`"}`, frames[0])
}

func TestProcessExitIsReportedWithCodeAndStderr(t *testing.T) {
	_, rec := dial(t, sh(`echo "starting" >&2; echo "fatal: no API key" >&2; exit 3`), Options{})
	err := rec.waitClosed(t)
	var pe *ProcessExitError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 3, pe.ExitCode)
	assert.Contains(t, pe.Stderr, "fatal: no API key")
	assert.ErrorIs(t, err, transports.ErrClosed)
	assert.Contains(t, err.Error(), "exited with code 3")
}

func TestExitIsReportedEvenWhenAGrandchildHoldsStdout(t *testing.T) {
	c, rec := dial(t, sh(`sleep 1000 & exit 0`), Options{})
	err := rec.waitClosed(t)
	var pe *ProcessExitError
	require.ErrorAs(t, err, &pe, "the reader must not wait for the grandchild's copy of stdout")
	assert.NotEmpty(t, stdiotest.GroupMembers(c.Pid()), "the grandchild still runs until Close")
	require.NoError(t, c.Close(testwait.Context(t)))
	assert.Empty(t, stdiotest.WaitGroupGone(c.Pid(), 2*time.Second))
}

func TestCloseLadder(t *testing.T) {
	fast := Options{CloseStdinTimeout: 200 * time.Millisecond, TerminateTimeout: 200 * time.Millisecond}
	tests := []struct {
		name    string
		script  string
		minTime time.Duration // the ladder steps that must have been waited out
	}{
		// Each script prints {} once its traps and children are in place.
		{"exits when stdin closes", `echo {}; exec cat`, 0},
		{"needs SIGTERM", `echo {}; while :; do sleep 0.05; done`, fast.CloseStdinTimeout},
		{"ignores SIGTERM and needs SIGKILL", `trap "" TERM; echo {}; while :; do sleep 0.05; done`, fast.CloseStdinTimeout + fast.TerminateTimeout},
		{"leaves a grandchild", `sleep 1000 & echo {}; exec cat`, 0},
		{"grandchild ignores SIGTERM", `sh -c 'trap "" TERM; echo {}; while :; do sleep 0.05; done' & exec cat`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			c, err := Dial(testwait.Context(t), sh(tt.script), fast, rec)
			require.NoError(t, err)
			rec.waitFrames(t, 1) // the script is ready
			start := time.Now()
			require.NoError(t, c.Close(testwait.Context(t)))
			assert.GreaterOrEqual(t, time.Since(start), tt.minTime)
			rec.waitClosed(t)
			assert.Empty(t, stdiotest.WaitGroupGone(c.Pid(), 2*time.Second), "no process of the group survives")
			require.NoError(t, c.Close(testwait.Context(t)), "Close is idempotent")
		})
	}
}

func TestCloseHonoursItsContext(t *testing.T) {
	slow := Options{CloseStdinTimeout: time.Second, TerminateTimeout: time.Second}
	c, rec := dial(t, sh(`trap "" TERM; while :; do sleep 0.05; done`), slow)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := c.Close(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "still in progress")
	_ = rec
}

func TestSendOnAFullPipeHonoursTheContext(t *testing.T) {
	c, _ := dial(t, sh(`sleep 1000`), Options{CloseStdinTimeout: 100 * time.Millisecond}) // never reads stdin
	frame := []byte(`{"p":"` + strings.Repeat("q", 1<<20) + `"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Send(ctx, frame)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.ErrorIs(t, err, transports.ErrClosed, "a partly written frame ends the connection")
	assert.ErrorIs(t, c.Send(testwait.Context(t), []byte(`{}`)), transports.ErrClosed)
}

func TestSendAfterCloseFails(t *testing.T) {
	c, _ := dial(t, transports.Config{Command: "cat"}, Options{})
	require.NoError(t, c.Close(testwait.Context(t)))
	assert.ErrorIs(t, c.Send(testwait.Context(t), []byte(`{}`)), transports.ErrClosed)
}

func TestStartErrorsKeepTheirCause(t *testing.T) {
	_, err := Dial(testwait.Context(t), transports.Config{Command: "mcpvisor-no-such-command"}, Options{}, newRecorder())
	assert.ErrorIs(t, err, exec.ErrNotFound)

	_, err = Dial(testwait.Context(t), transports.Config{Command: "/bin/sh", Cwd: "/no/such/dir"}, Options{}, newRecorder())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/no/such/dir")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Dial(ctx, transports.Config{Command: "cat"}, Options{}, newRecorder())
	assert.True(t, errors.Is(err, context.Canceled))
}

func TestRingKeepsTheLatestBytes(t *testing.T) {
	r := newRing(10)
	r.Write([]byte("hello "))
	r.Write([]byte("world\nline2\n"))
	assert.Equal(t, "ld\nline2\n", string(r.Bytes())[1:])
	assert.Len(t, r.Bytes(), 10)
	assert.Equal(t, "line2", r.Tail(5), "a line cut by the ring boundary is not quoted")
	r.Write([]byte(strings.Repeat("a", 25)))
	assert.Equal(t, strings.Repeat("a", 10), string(r.Bytes()))

	small := newRing(100)
	small.Write([]byte("one\ntwo\nthree\n"))
	assert.Equal(t, "two\nthree", small.Tail(2))
}

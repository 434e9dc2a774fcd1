package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/audit"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// writeTrail writes n entries to a new trail at path and closes it.
func writeTrail(t *testing.T, o audit.Options, n int) {
	t.Helper()
	w, err := audit.New(o)
	require.NoError(t, err)
	for i := range n {
		w.Record(audit.Entry{Action: audit.ActionToolsCall, Tool: fmt.Sprintf("mcp__a__t%d", i), Server: "a",
			Outcome: audit.OutcomeOK, SessionID: "sess-1", Duration: time.Millisecond, RequestID: json.RawMessage(fmt.Sprint(i))})
	}
	require.NoError(t, w.Close(testwait.Context(t)))
	assert.Equal(t, uint64(n), w.Stats().Lines)
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.SplitAfter(string(b), "\n")[:strings.Count(string(b), "\n")]
}

func writeLines(t *testing.T, path string, lines []string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600))
}

// A trail written by a Writer verifies, chained from genesis; its lines
// carry the fields given, the session as a tag and never the id.
func TestAuditTrailVerifies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.log")
	writeTrail(t, audit.Options{Path: path, Member: "m1"}, 5)
	rep, err := audit.Verify(path)
	require.NoError(t, err)
	assert.Equal(t, 5, rep.Lines)
	assert.True(t, rep.FromGenesis)
	assert.Equal(t, uint64(1), rep.FirstSeq)
	assert.Equal(t, uint64(5), rep.LastSeq)

	lines := readLines(t, path)
	require.Len(t, lines, 5)
	l, err := audit.DecodeLine([]byte(strings.TrimSuffix(lines[2], "\n")))
	require.NoError(t, err)
	assert.Equal(t, uint64(3), l.Seq)
	assert.Equal(t, "mcp__a__t2", l.Tool)
	assert.Equal(t, "m1", l.Member)
	assert.Equal(t, "2", string(l.RequestID))
	assert.Equal(t, int64(time.Millisecond), l.DurationNs)
	assert.Len(t, l.Session, 32)
	ts, err := time.Parse(time.RFC3339Nano, l.Time)
	require.NoError(t, err)
	assert.Equal(t, time.UTC, ts.Location())
	assert.NotContains(t, strings.Join(lines, ""), "sess-1", "the session id itself is never written")
	first, _ := audit.DecodeLine([]byte(strings.TrimSuffix(lines[0], "\n")))
	assert.Equal(t, audit.Genesis, first.Prev)
	assert.Equal(t, l.Session, first.Session, "one session, one tag")
}

// Each way of tampering with a trail is caught, at the line where the
// chain breaks.
func TestAuditVerifyCatchesTampering(t *testing.T) {
	dir := t.TempDir()
	orig := filepath.Join(dir, "orig.log")
	writeTrail(t, audit.Options{Path: orig}, 6)
	good := readLines(t, orig)

	cases := []struct {
		name     string
		tamper   func([]string) []string
		sentinel error
		line     int
	}{
		{"edited", func(l []string) []string {
			l[2] = strings.Replace(l[2], `"outcome":"ok"`, `"outcome":"error"`, 1)
			return l
		}, audit.ErrHashMismatch, 4},
		{"removed", func(l []string) []string { return append(l[:3:3], l[4:]...) }, audit.ErrSeqGap, 4},
		{"reordered", func(l []string) []string {
			l[2], l[3] = l[3], l[2]
			return l
		}, audit.ErrSeqGap, 3},
		{"truncated", func(l []string) []string {
			l[5] = l[5][:len(l[5])/2]
			return l
		}, audit.ErrTruncated, 6},
		{"edited to garbage", func(l []string) []string {
			l[1] = "{not json\n"
			return l
		}, audit.ErrBadLine, 2},
		{"first line removed", func(l []string) []string { return l[1:] }, nil, 0},
		{"genesis forged", func(l []string) []string {
			l[0] = strings.Replace(l[0], audit.Genesis, strings.Repeat("1", 64), 1)
			return l
		}, audit.ErrNotGenesis, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".log")
			writeLines(t, path, c.tamper(append([]string(nil), good...)))
			rep, err := audit.Verify(path)
			if c.sentinel == nil {
				// Without the older file, the trail verifies, but not
				// from genesis: the report says so.
				require.NoError(t, err)
				assert.False(t, rep.FromGenesis)
				assert.Equal(t, uint64(2), rep.FirstSeq)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, audit.ErrBroken)
			assert.ErrorIs(t, err, c.sentinel)
			var be *audit.BreakError
			require.ErrorAs(t, err, &be)
			assert.Equal(t, c.line, be.Line, "%v", err)
			assert.Equal(t, path, be.File)
		})
	}
}

// Rotation keeps the chain across files: the first line of a new file
// chains to the last of the one before; only Keep rotated files stay;
// verifying the kept files oldest first passes, and a file left out
// breaks it.
func TestAuditRotationKeepsTheChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.log")
	writeTrail(t, audit.Options{Path: path, MaxSize: 600, Keep: 3}, 40)
	files := []string{path + ".3", path + ".2", path + ".1", path}
	for _, f := range files {
		st, err := os.Stat(f)
		require.NoError(t, err)
		assert.LessOrEqual(t, st.Size(), int64(600))
	}
	_, err := os.Stat(path + ".4")
	assert.ErrorIs(t, err, os.ErrNotExist, "only Keep rotated files are kept")
	rep, err := audit.Verify(files...)
	require.NoError(t, err)
	assert.Equal(t, uint64(40), rep.LastSeq)
	assert.False(t, rep.FromGenesis, "the oldest files were rotated away")
	assert.Equal(t, 4, rep.Files)

	_, err = audit.Verify(path+".3", path+".1", path)
	assert.ErrorIs(t, err, audit.ErrSeqGap, "a file left out in the middle")

	// A Writer that opens the trail again goes on with its chain.
	writeTrail(t, audit.Options{Path: path, MaxSize: 600, Keep: 3}, 3)
	rep, err = audit.Verify(path+".3", path+".2", path+".1", path)
	require.NoError(t, err)
	assert.Equal(t, uint64(43), rep.LastSeq)
}

// A Writer reopening a trail whose last line was cut off (a crash
// mid-write) rotates it out as it is and goes on from the last whole
// line; Verify reports the cut.
func TestAuditReopenAfterPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.log")
	writeTrail(t, audit.Options{Path: path}, 3)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"seq":4,"prev":"ab`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	writeTrail(t, audit.Options{Path: path}, 2)
	_, err = audit.Verify(path + ".1")
	assert.ErrorIs(t, err, audit.ErrTruncated)
	rep, err := audit.Verify(path)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), rep.FirstSeq)
	assert.Equal(t, uint64(5), rep.LastSeq)
}

// Entries recorded from many goroutines at once make one valid chain.
func TestAuditConcurrentRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.log")
	w, err := audit.New(audit.Options{Path: path, Queue: 10000, MaxSize: 8 << 10, Keep: 100})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				w.Record(audit.Entry{Action: audit.ActionToolsCall, Tool: fmt.Sprintf("t%d-%d", g, i), Outcome: audit.OutcomeOK})
			}
		})
	}
	testwait.Call(t, "the goroutines recording", wg.Wait)
	require.NoError(t, w.Close(testwait.Context(t)))
	st := w.Stats()
	assert.Equal(t, uint64(1600), st.Lines+st.Dropped)
	assert.Zero(t, st.Dropped)
	matches, _ := filepath.Glob(path + ".*")
	files := make([]string, 0, len(matches)+1)
	for i := len(matches); i >= 1; i-- {
		files = append(files, fmt.Sprintf("%s.%d", path, i))
	}
	files = append(files, path)
	rep, err := audit.Verify(files...)
	require.NoError(t, err)
	assert.Equal(t, 1600, rep.Lines)
	assert.True(t, rep.FromGenesis)
}

// blockingWriter holds every Write until released.
type blockingWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	entered chan struct{}
	release chan struct{}
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release // testwait:ok the writer's goroutine waits here; every test closes release
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Record never blocks: with the writer stuck, a full queue drops
// entries, counts them, and the next line written says how many.
func TestAuditFullQueueDropsAndSays(t *testing.T) {
	out := &blockingWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	w, err := audit.New(audit.Options{Output: out, Queue: 2})
	require.NoError(t, err)
	e := audit.Entry{Action: audit.ActionToolsCall, Outcome: audit.OutcomeOK}
	w.Record(e)
	testwait.Recv(t, out.entered, "the writer to take the first entry")
	testwait.Call(t, "ten Records with the writer stuck", func() {
		for range 10 {
			w.Record(e)
		}
	})
	assert.Equal(t, uint64(8), w.Stats().Dropped, "2 queued, 8 dropped")
	close(out.release)
	w.Record(e) // may be dropped too, or written: either way it's counted
	require.NoError(t, w.Close(testwait.Context(t)))
	var dropped uint64
	for _, line := range strings.Split(strings.TrimSpace(out.buf.String()), "\n") {
		l, err := audit.DecodeLine([]byte(line))
		require.NoError(t, err)
		dropped += l.Dropped
	}
	st := w.Stats()
	assert.Equal(t, st.Dropped, dropped, "every drop is said in a line")
	assert.Equal(t, uint64(12), st.Lines+st.Dropped)
	assert.Positive(t, dropped)

	// Verify reads a trail written to a stream as well.
	path := filepath.Join(t.TempDir(), "stdout.log")
	require.NoError(t, os.WriteFile(path, out.buf.Bytes(), 0o600))
	_, err = audit.Verify(path)
	require.NoError(t, err)
}

// A trail whose last line is not a trail line is not taken up.
func TestAuditRefusesABadTrail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.log")
	require.NoError(t, os.WriteFile(path, []byte("hello\n"), 0o600))
	_, err := audit.New(audit.Options{Path: path})
	assert.ErrorIs(t, err, audit.ErrBadTrail)
	_, err = audit.New(audit.Options{})
	assert.ErrorIs(t, err, audit.ErrInvalidOptions)
}

// Arguments and results are never written unless asked for, and then
// redacted: a secret-looking value never reaches the trail.
func TestAuditArgumentsRedacted(t *testing.T) {
	args := json.RawMessage(`{"query":"weather","api_key":"k-123456789","nested":{"Password":"hunter22","list":["Bearer abcdefghijklmnop","ghp_abcdefghijklmnopqrstuvwxyz0123456789"]},` +
		`"url":"https://bob:pw-12345678@example.com/x?token=tok-99999999&page=2#frag","jwt":"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl","n":12345678901234567890}`)
	secrets := []string{"k-123456789", "hunter22", "abcdefghijklmnop", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "bob", "pw-12345678", "tok-99999999", "eyJhbGciOiJIUzI1NiJ9"}
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("arguments=", keep), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "trail.log")
			w, err := audit.New(audit.Options{Path: path, Arguments: keep, Results: keep})
			require.NoError(t, err)
			w.Record(audit.Entry{Action: audit.ActionToolsCall, Outcome: audit.OutcomeOK, Arguments: args, Result: args})
			require.NoError(t, w.Close(testwait.Context(t)))
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			for _, s := range secrets {
				assert.NotContains(t, string(b), s)
			}
			l, err := audit.DecodeLine(bytes.TrimSpace(b))
			require.NoError(t, err)
			if !keep {
				assert.Nil(t, l.Arguments)
				assert.Nil(t, l.Result)
				assert.NotContains(t, string(b), "weather")
				return
			}
			assert.Contains(t, string(l.Arguments), `"query":"weather"`)
			assert.Contains(t, string(l.Arguments), `"api_key":"[redacted]"`)
			assert.Contains(t, string(l.Arguments), `"n":12345678901234567890`, "numbers stay exact")
			assert.Contains(t, string(l.Arguments), `https://[redacted]@example.com/x?page=[redacted]\u0026token=[redacted]#frag`)
			assert.Equal(t, l.Arguments, l.Result)
		})
	}
	big := json.RawMessage(`"` + strings.Repeat("x", 100) + `"`)
	assert.Equal(t, `"[102 bytes, not kept]"`, string(audit.Redact(big, 50)))
	assert.Equal(t, `"[redacted]"`, string(audit.Redact(json.RawMessage(`{"a":`), 0)), "not JSON: replaced whole")
}

func TestAuditCloseIsBounded(t *testing.T) {
	out := &blockingWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	w, err := audit.New(audit.Options{Output: out})
	require.NoError(t, err)
	w.Record(audit.Entry{Action: audit.ActionToolsCall, Outcome: audit.OutcomeOK})
	testwait.Recv(t, out.entered, "the writer to take the entry")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, w.Close(ctx), context.DeadlineExceeded, "a stuck output does not hang Close")
	close(out.release)
	require.NoError(t, w.Close(testwait.Context(t)))
	w.Record(audit.Entry{Action: audit.ActionToolsCall, Outcome: audit.OutcomeOK})
	assert.Equal(t, uint64(1), w.Stats().Dropped, "a Record after Close is dropped")
	require.NoError(t, w.Close(testwait.Context(t)), "Close again")
}

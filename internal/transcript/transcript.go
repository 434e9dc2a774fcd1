// Package transcript records the JSON-RPC frames of one MCP connection,
// in the order they cross the wire, and compares them with a golden txtar
// file: the wire tests of the session and gateway packages use it to pin
// exactly what mcpvisor sends and receives in each protocol era.
//
// A transcript file is a txtar archive (golang.org/x/tools/txtar). Its
// comment says what the scenario does; each member is one frame, named
// after the side that wrote it ("client" or "server"), holding the frame
// indented with two spaces. Indenting keeps every member, value and the
// order of members of the frame as sent: only whitespace is added.
//
// What varies from run to run is rewritten before comparing, in one place
// (Normalize): listening ports, timestamps and the values of the
// members named in Volatile. Everything else must match byte for byte.
//
// The package serves tests only; nothing in the library imports it.
package transcript

import (
	"slices"
	"time"

	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
	"github.com/mcpvisor/mcpvisor/protocol"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/mcpvisor/mcpvisor/transports"
)

// The sides that write frames, as named in a transcript.
const (
	Client = "client"
	Server = "server"
)

// Frame is one JSON-RPC message as it crossed the wire.
type Frame struct {
	From string // Client or Server
	Data []byte // the frame's bytes, as sent
}

// Recorder keeps the frames of one connection in the order they were
// sent or delivered. A frame the client sends is recorded before it is
// written, so that it precedes the server's answer to it.
//
// The zero value is ready to use.
//
// Concurrency: Conn's Send, the Receiver's Frame, Frames and Await may
// run in any goroutines at once; mu guards frames and grew.
type Recorder struct {
	mu     sync.Mutex
	frames []Frame       // guarded by mu
	grew   chan struct{} // guarded by mu; closed (and replaced) when a frame is added
}

func (r *Recorder) add(from string, data []byte) {
	r.mu.Lock()
	r.frames = append(r.frames, Frame{From: from, Data: bytes.Clone(data)})
	if r.grew != nil {
		close(r.grew)
		r.grew = nil
	}
	r.mu.Unlock()
}

// Await returns when a frame from side with the JSON-RPC method has been
// recorded, or with an error saying what it waited for when ctx ends
// first. Scenarios use it to order what the session does in the
// background (a cancellation notice) before their next step.
func (r *Recorder) Await(ctx context.Context, from, method string) error {
	for {
		r.mu.Lock()
		for _, f := range r.frames {
			var m struct {
				Method string `json:"method"`
			}
			if f.From == from && json.Unmarshal(f.Data, &m) == nil && m.Method == method {
				r.mu.Unlock()
				return nil
			}
		}
		if r.grew == nil {
			r.grew = make(chan struct{})
		}
		grew := r.grew
		r.mu.Unlock()
		select {
		case <-grew:
		case <-ctx.Done():
			return fmt.Errorf("no %s frame with method %s was recorded: %w", from, method, ctx.Err())
		}
	}
}

// Frames returns the frames recorded so far.
func (r *Recorder) Frames() []Frame {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Frame(nil), r.frames...)
}

// Receiver returns a receiver that records each frame delivered to it as
// the server's, then passes it on to next.
func (r *Recorder) Receiver(next transports.Receiver) transports.Receiver {
	return &recordingReceiver{Receiver: next, rec: r}
}

// Conn returns a connection that records each frame sent through it as
// the client's, then sends it with next. It forwards the optional
// interfaces the session asks of a transport (transports.VersionSetter
// and transports.HeaderCarrier), so that recording leaves the wire as it
// is.
func (r *Recorder) Conn(next transports.Conn) transports.Conn {
	return &conn{next: next, rec: r}
}

type recordingReceiver struct {
	transports.Receiver
	rec *Recorder
}

func (rr *recordingReceiver) Frame(data []byte) {
	rr.rec.add(Server, data)
	rr.Receiver.Frame(data)
}

// conn records what is sent through next.
type conn struct {
	next transports.Conn
	rec  *Recorder
}

func (c *conn) Send(ctx context.Context, frame []byte) error {
	c.rec.add(Client, frame)
	return c.next.Send(ctx, frame)
}

func (c *conn) Close(ctx context.Context) error { return c.next.Close(ctx) }

// SetProtocolVersion forwards to the wrapped transport when it takes one.
func (c *conn) SetProtocolVersion(v string) {
	if vs, ok := c.next.(transports.VersionSetter); ok {
		vs.SetProtocolVersion(v)
	}
}

// CarriesRequestHeaders forwards to the wrapped transport when it can
// carry request headers.
func (c *conn) CarriesRequestHeaders() bool {
	hc, ok := c.next.(transports.HeaderCarrier)
	return ok && hc.CarriesRequestHeaders()
}

// Volatile names the members whose values change from run to run for
// reasons no transcript pins (random identifiers that a server makes up,
// clocks). Their values become "VOLATILE" wherever they occur.
var Volatile = []string{
	"Mcp-Session-Id",
	"sessionId",
	"createdAt",
	"lastUpdatedAt",
	"timestamp",
}

var (
	portPattern = regexp.MustCompile(`(127\.0\.0\.1|localhost|\[::1\]):\d+`)
	timePattern = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
)

// volatilePattern matches `"name": value` for the members of Volatile,
// where value is a string or a number.
var volatilePattern = func() *regexp.Regexp {
	names := make([]string, len(Volatile))
	for i, n := range Volatile {
		names[i] = regexp.QuoteMeta(n)
	}
	return regexp.MustCompile(`("(?:` + strings.Join(names, "|") + `)": )("(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*)`)
}()

// Normalize returns frame indented with two spaces, with what varies from
// run to run rewritten: a port on the loopback interface becomes PORT, an
// RFC 3339 time becomes TIME, and the value of a member named in Volatile
// becomes "VOLATILE". A frame that is not JSON is returned as it is, so
// that the comparison shows it.
func Normalize(frame []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, frame, "", "  "); err != nil {
		return string(frame)
	}
	s := buf.String()
	s = portPattern.ReplaceAllString(s, "${1}:PORT")
	s = timePattern.ReplaceAllString(s, "TIME")
	s = volatilePattern.ReplaceAllString(s, `${1}"VOLATILE"`)
	return s + "\n"
}

// Format renders frames as a transcript file with comment on top.
func Format(comment string, frames []Frame) []byte {
	a := &txtar.Archive{Comment: []byte(strings.TrimRight(comment, "\n") + "\n")}
	for _, f := range frames {
		a.Files = append(a.Files, txtar.File{Name: f.From, Data: []byte(Normalize(f.Data))})
	}
	return txtar.Format(a)
}

// Parse returns the frames of a transcript file, as normalized text.
func Parse(golden []byte) []Frame {
	var out []Frame
	for _, f := range txtar.Parse(golden).Files {
		out = append(out, Frame{From: f.Name, Data: f.Data})
	}
	return out
}

// Diff compares the frames of a transcript file (its bytes) with frames
// recorded in a run. It returns "" when they match, and otherwise a
// message that names the first frame that differs and shows both sides.
func Diff(golden []byte, got []Frame) string {
	want := txtar.Parse(golden)
	n := max(len(want.Files), len(got))
	for i := range n {
		var w, g string
		var wFrom, gFrom string
		if i < len(want.Files) {
			wFrom, w = want.Files[i].Name, string(want.Files[i].Data)
		}
		if i < len(got) {
			gFrom, g = got[i].From, Normalize(got[i].Data)
		}
		if w == g && wFrom == gFrom {
			continue
		}
		switch {
		case i >= len(want.Files):
			return fmt.Sprintf("frame %d: the transcript has %d frames; the run went on with this %s frame:\n%s",
				i+1, len(want.Files), gFrom, g)
		case i >= len(got):
			return fmt.Sprintf("frame %d: the run ended after %d frames; the transcript expects this %s frame:\n%s",
				i+1, len(got), wFrom, w)
		}
		return fmt.Sprintf("frame %d differs%s\n--- want (%s)\n%s--- got (%s)\n%s", i+1, firstLine(w, g), wFrom, w, gFrom, g)
	}
	return ""
}

// firstLine describes the first line where two frames differ.
func firstLine(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range min(len(w), len(g)) {
		if w[i] != g[i] {
			return fmt.Sprintf(" at line %d: want %q, got %q", i+1, strings.TrimSpace(w[i]), strings.TrimSpace(g[i]))
		}
	}
	return ""
}

// Check compares frames with the transcript file at path and fails t
// with Diff's message when they differ. With update it writes the file
// instead (creating its directory), with comment on top.
func Check(t testing.TB, path, comment string, frames []Frame, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, Format(comment, frames), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to record it)", err)
	}
	if d := Diff(golden, frames); d != "" {
		t.Errorf("%s: the wire differs from the transcript (run with -update if the change is intended):\n%s", path, d)
	}
}

// RequireScenarios fails t when a .txtar file of dir is not among files:
// a transcript no scenario writes would never be checked again.
func RequireScenarios(t testing.TB, dir string, files []string) {
	t.Helper()
	found, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		if !slices.Contains(files, filepath.Base(f)) {
			t.Errorf("%s has no scenario in %s: remove it or add one", f, t.Name())
		}
	}
}

// OpenSession opens a client session over dial at version (empty:
// negotiated), bounded by testwait's patience, and closes it when the test
// ends; it returns the session and the context its calls should use.
func OpenSession(t testing.TB, dial session.DialFunc, version string) (context.Context, *session.Session) {
	t.Helper()
	ctx := testwait.Context(t)
	s, err := session.Open(ctx, dial, session.Options{
		ClientInfo:      protocol.Implementation{Name: "mcpvisor-test", Version: "0"},
		ProtocolVersion: version,
	})
	if err != nil {
		t.Fatalf("opening the session: %v", err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Close(cctx, nil)
	})
	return ctx, s
}

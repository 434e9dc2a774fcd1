package mcpserver

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Byte bounds on what clients make a Server keep.
//
// A session's state is what its client made the Server keep for it: its
// clientInfo and capabilities (initialize; on a connection of the
// stateless era, those of its latest request's _meta), its resource
// subscriptions, and the resource filters of its open
// subscriptions/listen streams. Each is counted at the size of the JSON
// text the client sent (what is kept decoded is no larger), a URI with
// uriOverhead more for its table entry.
//
//   - Options.MaxSessionState bounds one session's state. A request that
//     would pass it is refused with CodeSessionStateTooLarge: an
//     initialize before any session is made for it (over HTTP, before an
//     id is minted or another session evicted), a resources/subscribe or
//     subscriptions/listen before anything is subscribed.
//   - Options.MaxRetained bounds the state of every session together,
//     each HTTP session and connection counted sessionOverhead more for
//     being open. A new HTTP session that would pass it evicts the
//     longest-idle HTTP sessions first (idle before busy, as
//     HTTPOptions.MaxSessions does), down to a 64th below the bound; a
//     request of a session already open that would pass it is refused
//     with CodeSessionStateTooLarge.
//
// The counts are in Stats.

// CodeSessionStateTooLarge is the JSON-RPC error of a request refused
// because what it would make the Server keep passes
// Options.MaxSessionState or Options.MaxRetained. Its data is a
// StateLimitData.
const CodeSessionStateTooLarge = -32060

// StateLimitData is the data of a CodeSessionStateTooLarge error.
type StateLimitData struct {
	// Bound is "session" (Options.MaxSessionState) or "total"
	// (Options.MaxRetained).
	Bound string `json:"bound"`
	// Max is that bound, in bytes.
	Max int64 `json:"max"`
	// Size is what the request would have made it, in bytes.
	Size int64 `json:"size"`
}

// Defaults of the byte bounds.
const (
	// DefaultMaxSessionState is Options.MaxSessionState's zero value:
	// ample for any client's info and capabilities (a few hundred bytes
	// in practice) and hundreds of subscriptions.
	DefaultMaxSessionState = 64 << 10
	// DefaultMaxRetained is Options.MaxRetained's zero value: a thousand
	// sessions at the per-session bound.
	DefaultMaxRetained = 64 << 20
	// DefaultBodyTimeout is HTTPOptions.BodyTimeout's zero value.
	DefaultBodyTimeout = 30 * time.Second
)

// sessionOverhead is what an open HTTP session or connection is counted
// in the Server's total besides its state: about what it costs idle.
const sessionOverhead = 2 << 10

// uriOverhead is what a subscribed URI is counted besides its length:
// its map entry.
const uriOverhead = 64

// Bounds of the state.
const (
	boundSession = "session"
	boundTotal   = "total"
)

// errBodyTimeout: a POST's body did not arrive within
// HTTPOptions.BodyTimeout.
var errBodyTimeout = errors.New("mcpserver: the request body did not arrive in time")

// stateError is the error of what, refused at bound (max bytes) because
// it would make the state size bytes.
func stateError(what, bound string, max, size int64) *protocol.Error {
	var e *protocol.Error
	if bound == boundSession {
		e = protocol.NewError(CodeSessionStateTooLarge,
			"%s: this would make the server keep %d bytes for the session, more than the %d it keeps per session (client info, capabilities, subscriptions)",
			what, size, max)
	} else {
		e = protocol.NewError(CodeSessionStateTooLarge,
			"%s: the server keeps at most %d bytes for all its sessions together, and has no room for this one: retry later",
			what, max)
	}
	e.Data, _ = json.Marshal(StateLimitData{Bound: bound, Max: max, Size: size})
	return e
}

// initStateSize is what an initialize's params make a session keep: the
// JSON text of its clientInfo and capabilities (all of params when they
// cannot be scanned). One pass over params.
func initStateSize(params json.RawMessage) int64 {
	var n int64
	if !protocol.EachMember(params, func(k, v []byte) bool {
		switch string(k) {
		case "clientInfo", "capabilities":
			n += int64(len(v))
		}
		return true
	}) {
		return int64(len(params))
	}
	return n
}

// budget is the Server's byte accounting: what the sessions make it keep
// (their state, see held) against Options.MaxSessionState per session and
// Options.MaxRetained in total, and the counts of what was refused.
//
// Concurrency: lock-free; retained only changes by atomic adds and
// compare-and-swap; maxState and maxRetained are set by New.
type budget struct {
	// maxState and maxRetained are Options.MaxSessionState and
	// Options.MaxRetained (0: no bound); retained is the bytes every
	// session holds together.
	maxState, maxRetained int64
	retained              atomic.Int64

	stateRefused, retainedRefused, evictedForBytes atomic.Uint64
}

// checkInitSize refuses initialize params whose retained part passes
// Options.MaxSessionState.
func (b *budget) checkInitSize(params json.RawMessage) *protocol.Error {
	if max := b.maxState; max > 0 {
		if n := initStateSize(params); n > max {
			b.stateRefused.Add(1)
			return stateError(protocol.MethodInitialize, boundSession, max, n)
		}
	}
	return nil
}

// reserve adds n bytes to the Server's total unless that would pass
// Options.MaxRetained.
func (b *budget) reserve(n int64) bool {
	for {
		cur := b.retained.Load()
		if b.maxRetained > 0 && cur+n > b.maxRetained {
			return false
		}
		if b.retained.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// held is what one session is counted for in its Server's budget: state
// is the bytes of what the client made the Server keep for the session,
// initState the part its clientInfo and capabilities make; overhead what
// the session is counted for being open (HTTP sessions and connections).
// All three are in the budget's retained total until the session closes.
//
// Concurrency: guarded by the session's mu (every method is called with
// it held); b never changes.
type held struct {
	b                          *budget
	state, initState, overhead int64
}

// charge changes the session's state by delta bytes for what (a method).
// Growth is refused, with nothing changed, when the session's state would
// pass Options.MaxSessionState or the Server's total Options.MaxRetained.
// A closed session is charged nothing (Close released what it held).
func (h *held) charge(closed bool, what string, delta int64) *protocol.Error {
	if closed || delta == 0 {
		return nil
	}
	b := h.b
	if delta < 0 {
		delta = max(delta, -h.state)
		h.state += delta
		b.retained.Add(delta)
		return nil
	}
	if perr := h.check(what, delta); perr != nil {
		return perr
	}
	if !b.reserve(delta) {
		b.retainedRefused.Add(1)
		return stateError(what, boundTotal, b.maxRetained, b.retained.Load()+delta)
	}
	h.state += delta
	return nil
}

// check refuses n more bytes of state for what when the session's state
// would pass Options.MaxSessionState.
func (h *held) check(what string, n int64) *protocol.Error {
	if b := h.b; b.maxState > 0 && h.state+n > b.maxState {
		b.stateRefused.Add(1)
		return stateError(what, boundSession, b.maxState, h.state+n)
	}
	return nil
}

// setInit replaces the part of the state that clientInfo and
// capabilities make (initialize, or a connection's _meta) by n bytes.
func (h *held) setInit(closed bool, what string, n int64) *protocol.Error {
	if perr := h.charge(closed, what, n-h.initState); perr != nil {
		return perr
	}
	if !closed {
		h.initState = n
	}
	return nil
}

// release takes what the session holds out of the Server's total: it
// closed.
func (h *held) release() {
	h.b.retained.Add(-(h.state + h.overhead))
	h.state, h.overhead, h.initState = 0, 0, 0
}

// StateSize returns the bytes counted for the session's state (see
// Options.MaxSessionState); 0 once it closed.
func (s *Session) StateSize() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes.state
}

// uriSize is what subscribing uri is counted.
func uriSize(uri string) int64 { return int64(len(uri)) + uriOverhead }

// filterSize is what a listen stream's resource filter is counted.
func filterSize(uris []string) int64 {
	var n int64
	for _, u := range uris {
		n += uriSize(u)
	}
	return n
}

// readBody reads a POST's body, at most max+1 bytes (more is refused):
// in one allocation when the request says its length, as clients do. The
// read must finish within HTTPOptions.BodyTimeout (a body that never
// arrives is errBodyTimeout, and the deadline is left in place so that
// the connection closes); the deadline is cleared once the body is read,
// so that the answer's stream may last.
func (h *httpTransport) readBody(w http.ResponseWriter, r *http.Request, max int) ([]byte, error) {
	var rc *http.ResponseController
	if d := h.srv.opts.HTTP.BodyTimeout; d > 0 {
		if c := http.NewResponseController(w); c.SetReadDeadline(time.Now().Add(d)) == nil {
			rc = c
		}
	}
	var body []byte
	var err error
	if n := r.ContentLength; n >= 0 && n <= int64(max) {
		body = make([]byte, n)
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, err = io.ReadAll(io.LimitReader(r.Body, int64(max)+1))
	}
	if isTimeout(err) {
		// The deadline stays: what the server would read of the
		// connection next fails at once, and it is closed.
		return nil, errBodyTimeout
	}
	if rc != nil {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return body, err
}

// isTimeout reports whether err is a read deadline that passed.
func isTimeout(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// Hold counts n bytes that a request makes the Handler keep beyond its
// session's state (for example a stateless-era call that goes on while it
// waits for its client's input) in the total Options.MaxRetained bounds.
// It fails with CodeSessionStateTooLarge (to answer the request with)
// when they do not fit; else release gives them back (calling it more
// than once gives them back once).
func (s *Server) Hold(what string, n int64) (release func(), perr *protocol.Error) {
	if !s.budget.reserve(n) {
		s.budget.retainedRefused.Add(1)
		return nil, stateError(what, boundTotal, s.budget.maxRetained, s.budget.retained.Load()+n)
	}
	var once sync.Once
	return func() { once.Do(func() { s.budget.retained.Add(-n) }) }, nil
}

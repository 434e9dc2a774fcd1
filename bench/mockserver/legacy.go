package mockserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/transports/eventstream"
)

// The legacy HTTP+SSE transport (2024-11-05): GET /sse opens a session
// and is its stream, whose first event names the endpoint to POST to
// (/message?sessionId=…); every message of the server is a "message"
// event of that stream. The session is a connection of mcpserver's
// (ServeConn): the POSTs feed it, the stream carries what it writes.

// legacyInbox bounds the messages POSTed to a legacy session and not yet
// read.
const legacyInbox = 256

// legacyConn is one legacy session: a mcpserver.Conn whose messages come
// from POSTs and go to the GET's event stream.
//
// Concurrency: ReadMessage is called by mcpserver's reader, WriteMessage
// and WriteBytes by one writer at a time; mu guards the stream's writes
// and forgotten; done is closed once.
type legacyConn struct {
	id    string
	w     http.ResponseWriter // the GET /sse response
	inbox chan []byte
	done  chan struct{}
	once  sync.Once

	mu        sync.Mutex
	forgotten bool // guarded by mu: POSTs get 404 (the session expired)
	cutShort  bool // guarded by mu: nothing more is written (the server went down)
}

func (c *legacyConn) ReadMessage(ctx context.Context) ([]byte, error) {
	select {
	case m := <-c.inbox:
		return m, nil
	case <-c.done:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *legacyConn) WriteMessage(frame []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cutShort {
		return errLegacyGone
	}
	if err := eventstream.Write(c.w, eventstream.Event{Type: "message", Data: frame}, 0); err != nil {
		return err
	}
	return http.NewResponseController(c.w).Flush()
}

// WriteBytes implements mcpserver.RawWriter: bytes on the stream as they
// are.
func (c *legacyConn) WriteBytes(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cutShort {
		return errLegacyGone
	}
	if _, err := c.w.Write(b); err != nil {
		return err
	}
	return http.NewResponseController(c.w).Flush()
}

func (c *legacyConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return nil
}

// cut ends the session at once: nothing more is written.
func (c *legacyConn) cut() {
	c.mu.Lock()
	c.cutShort = true
	c.mu.Unlock()
	_ = c.Close()
}

// forget makes the session unknown to later POSTs.
func (c *legacyConn) forget() {
	c.mu.Lock()
	c.forgotten = true
	c.mu.Unlock()
}

// deliver hands a POSTed message to the session; false when it is gone.
func (c *legacyConn) deliver(msg []byte) bool {
	c.mu.Lock()
	gone := c.forgotten || c.cutShort
	c.mu.Unlock()
	if gone {
		return false
	}
	select {
	case c.inbox <- msg:
		return true
	case <-c.done:
		return false
	}
}

var errLegacyGone = errors.New("mockserver: the legacy session is gone")

// legacyStream serves GET /sse: a new HTTP+SSE session, announced by the
// endpoint event, whose answers and notifications are message events. The
// session ends with the stream.
func (h *handler) legacyStream(w http.ResponseWriter, r *http.Request) {
	done, _, ok := h.track()
	if !ok {
		http.Error(w, "mockserver: shutting down", http.StatusServiceUnavailable)
		return
	}
	defer done()
	var b [16]byte
	_, _ = rand.Read(b[:])
	c := &legacyConn{id: hex.EncodeToString(b[:]), w: w, inbox: make(chan []byte, legacyInbox), done: make(chan struct{})}
	h.mu.Lock()
	h.legacy[c.id] = c
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		if h.legacy[c.id] == c {
			delete(h.legacy, c.id)
		}
		h.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if err := eventstream.Write(w, eventstream.Event{Type: "endpoint", Data: []byte("/message?sessionId=" + c.id)}, 0); err != nil {
		return
	}
	if http.NewResponseController(w).Flush() != nil {
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-h.s.dead:
			cancel()
		case <-ctx.Done():
		}
	}()
	_ = h.s.srv.ServeConn(ctx, &boundLegacy{legacyConn: c, h: h})
	h.abortIfDead()
}

// boundLegacy is a legacy session that registers with the faults once
// ServeConn has made its mcpserver session.
type boundLegacy struct {
	*legacyConn
	h    *handler
	done func()
}

// BindSession implements mcpserver.SessionBinder.
func (b *boundLegacy) BindSession(sess *mcpserver.Session) {
	b.done = b.h.s.faults.onLegacySession(sess, b.forget)
}

func (b *boundLegacy) Close() error {
	if b.done != nil {
		b.done()
	}
	return b.legacyConn.Close()
}

// legacyPost serves POST /message?sessionId=…: 202; the answer goes to
// the session's stream.
func (h *handler) legacyPost(w http.ResponseWriter, r *http.Request) {
	if h.s.faults.takeBurst() {
		http.Error(w, "mockserver: injected 503", http.StatusServiceUnavailable)
		return
	}
	h.mu.Lock()
	c := h.legacy[r.URL.Query().Get("sessionId")]
	h.mu.Unlock()
	if c == nil {
		http.Error(w, "mockserver: session not found", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "mockserver: reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !c.deliver(body) {
		http.Error(w, "mockserver: session not found", http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Conn is a connection that carries one JSON-RPC message at a time, both
// ways (a WebSocket, for example): ServeConn serves one client over it.
type Conn interface {
	// ReadMessage returns the next message the client sent. An error ends
	// the connection; io.EOF says the client went away.
	ReadMessage(ctx context.Context) ([]byte, error)
	// WriteMessage writes one message. The Server never calls it (or
	// WriteBytes) concurrently.
	WriteMessage(frame []byte) error
	// Close closes the connection; a ReadMessage in progress returns.
	Close() error
}

// RawWriter is implemented by a Conn that can write bytes outside its
// framing (Wire.WriteBytes on a WireConn).
type RawWriter interface {
	WriteBytes(b []byte) error
}

// SessionBinder is implemented by a Conn that wants to know its session:
// ServeConn calls BindSession once, before it reads the first message.
type SessionBinder interface {
	BindSession(s *Session)
}

// errNoRawWrites is Wire.WriteBytes's error on a Conn that cannot.
var errNoRawWrites = errors.New("mcpserver: the connection writes whole messages only")

// ServeConn serves one client over c until c's ReadMessage fails (io.EOF
// ends it without an error), ctx ends, the session closes, or a write
// fails; then it closes c and the session (its requests are cancelled)
// and returns, after the requests it started (see Options.Inline) have
// returned.
func (s *Server) ServeConn(ctx context.Context, c Conn) error {
	w := &messageWriter{c: c}
	conn := newConnection(s, w, func() { _ = c.Close() })
	if b, ok := c.(SessionBinder); ok {
		b.BindSession(conn.sess)
	}
	err := conn.serve(ctx, func(ctx context.Context) ([]byte, error) { return c.ReadMessage(ctx) }, nil)
	_ = c.Close()
	return err
}

// lineSource reads the next message of a connection.
type lineSource func(ctx context.Context) ([]byte, error)

// connection is the session of a connection transport and where its
// messages are written: answers, notifications and requests alike, one
// at a time.
//
// Concurrency: mu serializes writes and guards closed, hold and err;
// done is closed once, by close.
type connection struct {
	srv     *Server
	sess    *Session
	w       connWriter
	onClose func() // closes what the connection reads from, when it can
	done    chan struct{}

	mu     sync.Mutex
	closed bool  // guarded by mu: nothing more is written
	hold   bool  // guarded by mu: writes are not flushed until flush
	err    error // guarded by mu: the write error that ended it
}

// connWriter writes a connection's messages: a stdio writer, or a Conn.
type connWriter interface {
	Wire
	// writeFrame writes one message (flushing when flush is set).
	writeFrame(frame []byte, flush bool) error
}

func newConnection(s *Server, w connWriter, onClose func()) *connection {
	c := &connection{srv: s, w: w, onClose: onClose, done: make(chan struct{})}
	c.sess = newSession(s, kindConn)
	c.sess.conn = c
	return c
}

// write writes one message (through Options.FrameHook).
func (c *connection) write(frame []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errClosedConn
	}
	var err error
	if hook := c.srv.opts.FrameHook; hook != nil {
		if err = hook(c.w, frame); err == nil && !c.hold {
			err = c.w.Flush()
		}
	} else {
		err = c.w.writeFrame(frame, !c.hold)
	}
	if err != nil {
		c.failLocked(err)
	}
	return err
}

// writeWith writes an answer of ResponseWriter.ReplyWith.
func (c *connection) writeWith(write func(Wire) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errClosedConn
	}
	err := write(c.w)
	if err == nil {
		err = c.w.Flush()
	}
	if err != nil {
		c.failLocked(err)
	}
	return err
}

var errClosedConn = errors.New("mcpserver: the connection is closed")

// failLocked ends the connection after a write error.
func (c *connection) failLocked(err error) {
	if c.err == nil {
		c.err = err
	}
	c.closeLocked()
}

// setHold makes writes wait for flush (true) or flush at once (false).
func (c *connection) setHold(hold bool) {
	c.mu.Lock()
	c.hold = hold
	c.mu.Unlock()
}

// flush writes what is held and ends the hold.
func (c *connection) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hold = false
	if !c.closed {
		if err := c.w.Flush(); err != nil {
			c.failLocked(err)
		}
	}
}

// close flushes what was written and stops writing; the session closes.
func (c *connection) close() {
	c.mu.Lock()
	if !c.closed {
		_ = c.w.Flush()
	}
	c.closeLocked()
	c.mu.Unlock()
	c.sess.Close()
}

func (c *connection) closeLocked() {
	if c.closed {
		return
	}
	c.closed = true
	close(c.done)
	if c.onClose != nil {
		go c.onClose()
	}
}

// failure returns the write error that ended the connection, if any.
func (c *connection) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// answer implements outlet.
func (c *connection) answer(frame []byte, write func(Wire) error, _ int64) {
	if write != nil {
		_ = c.writeWith(write)
		return
	}
	_ = c.write(frame)
}

// notify implements outlet.
func (c *connection) notify(frame []byte) bool { return c.write(frame) == nil }

// abandoned implements outlet: nothing is written.
func (c *connection) abandoned() {}

// serve reads messages with read until it fails, ctx ends, the
// session closes or a write fails, and dispatches each. batch, when not
// nil, reports whether more messages are read already (their answers are
// then held and written together).
func (c *connection) serve(ctx context.Context, read lineSource, batch func() bool) error {
	s := c.srv
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sess := c.sess
	s.table.track(sess)
	var wg sync.WaitGroup
	readErr := make(chan error, 1)
	go func() {
		readErr <- c.readLoop(ctx, read, batch, &wg)
	}()
	var err error
	select {
	case err = <-readErr:
	case <-ctx.Done():
	case <-c.done:
	}
	cancel()
	c.close()
	wg.Wait()
	if ferr := c.failure(); ferr != nil {
		return ferr
	}
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// readLoop reads and dispatches the messages of c.
func (c *connection) readLoop(ctx context.Context, read lineSource, batch func() bool, wg *sync.WaitGroup) error {
	for {
		line, err := read(ctx)
		if len(bytes.TrimSpace(line)) > 0 {
			more := batch != nil && batch()
			if more {
				c.setHold(true)
			}
			c.handleLine(ctx, line, wg)
			if !more && batch != nil {
				c.flush()
			}
		}
		if err != nil {
			return err
		}
		select {
		case <-c.done:
			return nil
		default:
		}
	}
}

// handleLine decodes and dispatches one message of connection c.
func (c *connection) handleLine(ctx context.Context, line []byte, wg *sync.WaitGroup) {
	s := c.srv
	m, err := protocol.Decode(line)
	if err != nil {
		_ = c.write(decodeError(err))
		return
	}
	sess := c.sess
	switch m.Kind {
	case protocol.KindNotification:
		sess.touch()
		s.handleNotification(ctx, sess, m)
		return
	case protocol.KindResponse:
		sess.touch()
		s.handleResponse(sess, m)
		return
	}
	if s.opts.Inline {
		x, ok := newExchange(ctx, s, sess, m, c, false)
		if !ok {
			x.Error(protocol.NewError(protocol.CodeInvalidRequest, "session closed"))
			return
		}
		s.serveRequest(x)
		return
	}
	x, ok := newExchange(ctx, s, sess, m, c, true)
	if !ok {
		_ = c.write(errorFrame(m.ID, protocol.NewError(protocol.CodeInvalidRequest, "session closed")))
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.serveRequest(x)
	}()
}

// decodeError is the answer to a message that does not decode.
func decodeError(err error) []byte {
	code := int64(protocol.CodeParseError)
	if errors.Is(err, protocol.ErrBatch) || errors.Is(err, protocol.ErrInvalidMessage) {
		code = protocol.CodeInvalidRequest
	}
	return errorFrame(protocol.ID{}, protocol.NewError(code, "%v", err))
}

// errorFrame encodes an error response.
func errorFrame(id protocol.ID, e *protocol.Error) []byte {
	b, err := protocol.AppendError(nil, id, e)
	if err != nil {
		b, _ = protocol.AppendError(nil, id, protocol.NewError(protocol.CodeInternalError, "%s", e.Message))
	}
	return b
}

// messageWriter is the Wire of a Conn.
type messageWriter struct{ c Conn }

func (w *messageWriter) Kind() WireKind                    { return WireConn }
func (w *messageWriter) WriteMessage(data []byte) error    { return w.c.WriteMessage(data) }
func (w *messageWriter) Flush() error                      { return nil }
func (w *messageWriter) Header() http.Header               { return nil }
func (w *messageWriter) writeFrame(f []byte, _ bool) error { return w.c.WriteMessage(f) }

func (w *messageWriter) WriteBytes(b []byte) error {
	if rw, ok := w.c.(RawWriter); ok {
		return rw.WriteBytes(b)
	}
	return fmt.Errorf("%w (%T)", errNoRawWrites, w.c)
}

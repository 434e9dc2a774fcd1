package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// core is the request core of a session: the correlation table of the
// calls waiting for an answer, the writing of requests and notifications
// on the connection, cancellation, and the end of the session.
//
// Concurrency: a call registers its waiter and writes its frame on the
// caller's goroutine; the transport's read goroutine completes the waiter
// (complete). pending, err and the closing of done are guarded by mu;
// conn is set once by Open before any frame is sent (attached is closed
// then) and only read afterwards. The counters are atomic.
type core struct {
	log     zerolog.Logger
	handler Handler // told of an end found on a write; may be nil

	conn     transports.Conn
	attached chan struct{} // closed once conn is set

	nextID atomic.Int64

	mu      sync.Mutex
	pending map[int64]*call // guarded by mu
	// calls recycles this session's finished calls (*call). It is the
	// session's own, not the process's: a call's channel is made by a
	// goroutine of the session's owner, so that a session inside a
	// testing/synctest bubble never waits on a channel made outside it
	// (which the bubble cannot see as durably blocked).
	calls sync.Pool
	err   error         // guarded by mu; non-nil once the session ended
	done  chan struct{} // closed when err is set

	// bg counts the goroutines the session started and Close waits for:
	// cancellation notices, server requests being answered, listen
	// streams.
	bg sync.WaitGroup

	// Liveness counters: calls that timed out, calls given up before
	// their answer.
	timedOut  atomic.Uint64
	abandoned atomic.Uint64
}

// call is one pending request. ch is buffered so that completing never
// blocks the read goroutine.
type call struct {
	ch chan reply
}

type reply struct {
	result json.RawMessage
	err    error
}

// attach sets the connection, once, before anything is sent.
func (c *core) attach(conn transports.Conn) {
	c.conn = conn
	close(c.attached)
}

// ended returns why the session ended, or nil while it runs.
func (c *core) ended() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// admit runs f under the table's lock unless the session has ended, in
// which case it returns the session's error: what starts under admit is
// ordered before the end (and so before Close waits for bg).
func (c *core) admit(f func()) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	f()
	return nil
}

// waiting returns the number of pending calls.
func (c *core) waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// send encodes request id with params as they are, sends it and waits for
// its answer: until ctx ends, and, when answerWithin is positive, for at
// most that long once the request is sent.
func (c *core) send(ctx context.Context, id int64, method string, params any, answerWithin time.Duration) (json.RawMessage, error) {
	start := time.Now()
	var buf []byte
	if raw, ok := params.(protocol.ValidJSON); ok {
		// Sized for the envelope, so that encoding allocates once.
		buf = make([]byte, 0, len(raw)+len(method)+64)
	}
	frame, err := protocol.AppendRequest(buf, protocol.Int64ID(id), method, params)
	if err != nil {
		return nil, err
	}
	w, _ := c.calls.Get().(*call)
	if w == nil {
		w = &call{ch: make(chan reply, 1)}
	}
	if err := c.admit(func() { c.pending[id] = w }); err != nil {
		c.calls.Put(w)
		return nil, fmt.Errorf("%s: %w", method, err)
	}

	if err := c.conn.Send(ctx, frame); err != nil {
		if !c.forget(id) {
			<-w.ch // completed concurrently (the session ended); drain before reuse
		}
		c.calls.Put(w)
		if errors.Is(err, transports.ErrClosed) {
			c.endOnWrite(err)
			return nil, fmt.Errorf("%s: %w", method, c.ended())
		}
		if ctx.Err() != nil {
			return nil, c.ctxError(ctx, method, start, false)
		}
		return nil, fmt.Errorf("%s: %w", method, err)
	}

	var answerTimeout <-chan time.Time
	if answerWithin > 0 {
		t := time.NewTimer(answerWithin)
		defer t.Stop()
		answerTimeout = t.C
	}
	answered := func(r reply) (json.RawMessage, error) {
		c.calls.Put(w)
		if r.err != nil {
			return nil, fmt.Errorf("%s: %w", method, r.err)
		}
		return r.result, nil
	}
	select {
	case r := <-w.ch:
		return answered(r)
	case <-answerTimeout:
		if !c.forget(id) {
			return answered(<-w.ch) // the answer raced the timer and won: use it
		}
		c.calls.Put(w)
		c.abandoned.Add(1)
		c.notifyCancelled(id, true)
		return nil, &TimeoutError{Method: method, After: time.Since(start), Sent: true}
	case <-ctx.Done():
		if !c.forget(id) {
			return answered(<-w.ch) // the answer raced the deadline and won: use it
		}
		c.calls.Put(w)
		c.notifyCancelled(id, deadlinePassed(ctx))
		return nil, c.ctxError(ctx, method, start, true)
	}
}

// complete hands r to the call waiting for id and reports whether one was.
func (c *core) complete(id int64, r reply) bool {
	c.mu.Lock()
	w, ok := c.pending[id]
	if ok {
		delete(c.pending, id)
	}
	c.mu.Unlock()
	if ok {
		w.ch <- r
	}
	return ok
}

// forget removes a pending call and reports whether it was still pending.
func (c *core) forget(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[id]; !ok {
		return false
	}
	delete(c.pending, id)
	return true
}

// fail ends the session once: it records err and fails every pending call.
func (c *core) fail(err error) bool {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return false
	}
	c.err = err
	pending := c.pending
	c.pending = nil
	close(c.done)
	c.mu.Unlock()
	for _, w := range pending {
		w.ch <- reply{err: err}
	}
	return true
}

// endOnWrite ends the session on a write that found the connection
// unusable (a partial frame, a closed pipe) and tells the handler: the
// reader may never see an end, since a server that stopped reading its
// input can keep its output open for ever.
func (c *core) endOnWrite(err error) {
	if c.fail(fmt.Errorf("%w: %w", ErrConnectionClosed, err)) {
		if c.handler != nil {
			c.handler.Closed(c.ended())
		}
	}
}

// close ends the session with cause, shuts the transport down and waits
// for the session's goroutines, all bounded by ctx (see Session.Close).
func (c *core) close(ctx context.Context, cause error) error {
	c.fail(cause)
	err := c.conn.Close(ctx)
	waited := make(chan struct{})
	go func() { c.bg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
	}
	return err
}

func (c *core) ctxError(ctx context.Context, method string, start time.Time, sent bool) error {
	c.abandoned.Add(1)
	if deadlinePassed(ctx) {
		c.timedOut.Add(1)
		return &TimeoutError{Method: method, After: time.Since(start), Sent: sent}
	}
	return fmt.Errorf("%s: %w", method, context.Cause(ctx))
}

// deadlinePassed reports whether ctx ended because a deadline passed:
// its own, or one whose cause says so (a parent's deadline that can move,
// as the supervisor's default call deadline does with progress, cancels
// its children with such a cause).
func deadlinePassed(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(context.Cause(ctx), context.DeadlineExceeded)
}

// notifyCancelled tells the server, in the background and bounded in
// time, that the caller gave up on request id.
func (c *core) notifyCancelled(id int64, timedOut bool) {
	reason := "request cancelled by the client"
	if timedOut {
		reason = "request timed out"
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		nctx, cancel := context.WithTimeout(context.Background(), cancelNotifyTimeout)
		defer cancel()
		_ = c.notify(nctx, protocol.NotificationCancelled, protocol.CancelledParams{RequestID: protocol.Int64ID(id), Reason: reason})
	}()
}

// notify sends a notification.
func (c *core) notify(ctx context.Context, method string, params any) error {
	if err := c.ended(); err != nil {
		return err
	}
	frame, err := protocol.AppendRequest(nil, protocol.ID{}, method, params)
	if err != nil {
		return err
	}
	if err := c.conn.Send(ctx, frame); err != nil {
		if errors.Is(err, transports.ErrClosed) {
			c.endOnWrite(err)
		}
		return err
	}
	return nil
}

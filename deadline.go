package mcpvisor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// errDefaultDeadline is the cause of a call ended by its default deadline
// (Options.CallTimeout, ServerConfig.TimeoutMs): it matches
// context.DeadlineExceeded.
var errDefaultDeadline = fmt.Errorf("the call's default deadline passed: %w", context.DeadlineExceeded)

// withDefaultTimeout gives ctx a deadline d from now unless it already
// has one (the caller's deadline always wins). The returned cancel
// releases the timer; call it when the work is done, as with
// context.WithTimeout.
//
// The default deadline moves with progress: when ctx carries a
// progressClock (CallToolWith puts one in a call that asked for progress
// reports), each report of the call pushes the deadline to d from then,
// as a host's MCP client does with resetTimeoutOnProgress. A caller's own
// deadline never moves.
func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	inner, cancel := context.WithCancelCause(ctx)
	c := &movingDeadline{Context: inner, d: d, deadline: time.Now().Add(d)}
	c.timer = time.AfterFunc(d, func() { cancel(errDefaultDeadline) })
	if clock, _ := ctx.Value(progressClockKey{}).(*progressClock); clock != nil {
		clock.set(c)
	}
	return c, func() {
		c.timer.Stop()
		cancel(context.Canceled)
	}
}

// movingDeadline is a context whose deadline extend pushes back. Err
// reports context.DeadlineExceeded once the deadline passed (and
// context.Cause errDefaultDeadline); a context derived from it with a
// cancel function reports context.Canceled with that cause (the session
// reads the cause).
//
// Concurrency: mu guards deadline; any goroutine may call extend.
type movingDeadline struct {
	context.Context // cancelled with errDefaultDeadline when the deadline passes
	d               time.Duration
	timer           *time.Timer

	mu       sync.Mutex
	deadline time.Time
}

// Deadline reports the deadline as it is now.
func (c *movingDeadline) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadline, true
}

// Err is context.DeadlineExceeded once the deadline passed.
func (c *movingDeadline) Err() error {
	err := c.Context.Err()
	if err != nil && errors.Is(context.Cause(c.Context), errDefaultDeadline) {
		return context.DeadlineExceeded
	}
	return err
}

// extend moves the deadline to d from now, unless it already passed.
func (c *movingDeadline) extend() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Context.Err() != nil {
		return
	}
	if c.timer.Stop() {
		c.deadline = time.Now().Add(c.d)
		c.timer.Reset(c.d)
	}
}

// progressClock ties a call's progress reports to its default deadline:
// CallToolWith puts one in the call's context, withDefaultTimeout sets
// the deadline it made, and each report of the call ticks it.
//
// Concurrency: mu guards d; the session's reader ticks, the caller sets.
type progressClock struct {
	mu sync.Mutex
	d  *movingDeadline
}

type progressClockKey struct{}

// set makes d the deadline that reports move (the latest one made).
func (p *progressClock) set(d *movingDeadline) {
	p.mu.Lock()
	p.d = d
	p.mu.Unlock()
}

// tick moves the call's default deadline, if it has one.
func (p *progressClock) tick() {
	if p == nil {
		return
	}
	p.mu.Lock()
	d := p.d
	p.mu.Unlock()
	if d != nil {
		d.extend()
	}
}

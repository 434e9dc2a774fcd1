package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// leave hands this member's servers over and leaves the cluster
// gracefully, in this order:
//
//  1. drain: the member takes no new calls (callers elsewhere get a
//     retryable refusal and try the server's next owner) and places no
//     new server; it tells every other member so (Draining) and waits
//     (bounded) for their acknowledgements, after which they send it no
//     call;
//  2. the calls in flight finish, or fail typed by ctx's deadline;
//  3. its servers are released (the local Supervisor shuts them down), so
//     that no server ever runs on two members;
//  4. it leaves: its membership endpoint closes, the other members see it
//     gone at their next poll and their reconcilers activate its servers;
//  5. it keeps answering "draining" until no call has reached it for two
//     membership polls (every member has seen it go), then shuts its
//     cluster side down. (Shutting down at once loses the requests that
//     callers sent before they noticed: their futures would wait to their
//     deadline.)
//
// Between 3 and the others' activation a call waits (retries) within its
// deadline. Close must still be called to stop the local Supervisor. Leave is
// idempotent.
func (m *engine) leave(ctx context.Context) error {
	if m.left.Load() {
		return nil
	}
	m.mu.Lock()
	m.draining = true
	m.mu.Unlock()
	// Tell the others before anything else: a member that knows sends
	// no call here any more, so none can be lost with this member's
	// endpoint when it leaves.
	m.departed.announce(ctx, m.sys.Root, m.reconcile.latest(), m.id, m.sys.Address())
	var errs []error
	done := make(chan struct{})
	go func() { m.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("mcpvisor cluster: leaving with calls still in flight: %w", ctx.Err()))
	}
	if m.left.Swap(true) {
		return errors.Join(errs...)
	}
	for _, name := range m.placement.liveNames() {
		m.placement.push(name, false)
	}
	select {
	case <-m.placement.flush():
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("mcpvisor cluster: releasing the servers: %w", ctx.Err()))
	}
	m.provider.withdraw()
	if err := m.awaitQuiet(ctx, time.Now()); err != nil {
		errs = append(errs, err)
	}
	m.c.Shutdown(true)
	return errors.Join(errs...)
}

// awaitQuiet waits until no call has reached this draining member for two
// membership polls since stopped (the members have all seen it leave), or
// ctx ends.
func (m *engine) awaitQuiet(ctx context.Context, stopped time.Time) error {
	quiet := m.provider.quiet()
	tick := time.NewTicker(quiet / 4)
	defer tick.Stop()
	for {
		last := stopped
		if r := time.Unix(0, m.lastRefusal.Load()); r.After(last) {
			last = r
		}
		if time.Since(last) >= quiet {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mcpvisor cluster: calls still arriving while leaving: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

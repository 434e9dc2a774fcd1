package cluster

import (
	"context"
	"errors"
	"fmt"
)

// Leave hands this member's servers over and leaves the cluster
// gracefully, in this order:
//
//  1. drain: the member takes no new calls (callers elsewhere get a
//     retryable refusal and try the server's next owner) and places no
//     new server;
//  2. the calls in flight finish, or fail typed by ctx's deadline;
//  3. its servers are released (the local System shuts them down), so
//     that no server ever runs on two members;
//  4. it leaves: its membership endpoint closes, the other members see it
//     gone at their next poll and their reconcilers activate its servers.
//
// Between 3 and the others' activation a call waits (retries) within its
// deadline. Close must still be called to stop the local System. Leave is
// idempotent.
func (m *Member) Leave(ctx context.Context) error {
	if m.left.Load() {
		return nil
	}
	m.mu.Lock()
	m.draining = true
	m.mu.Unlock()
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
	for _, st := range m.local.Status() {
		m.placement.push(st.Name, false)
	}
	select {
	case <-m.placement.flush():
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("mcpvisor cluster: releasing the servers: %w", ctx.Err()))
	}
	m.provider.stopServing()
	m.c.Shutdown(true)
	return errors.Join(errs...)
}

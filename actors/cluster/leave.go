package cluster

import (
	"context"
	"fmt"
	"sort"
)

// Leave hands this member's servers over and leaves the cluster
// gracefully: it stops taking new calls (callers elsewhere retry on the
// next owner), lets the calls in flight finish or fail typed by ctx's
// deadline, releases its servers, and leaves, so that the other members
// see it gone at their next membership poll and activate its servers.
// Close must still be called to stop the local System. Leave is
// idempotent.
func (m *Member) Leave(ctx context.Context) error {
	if m.left.Load() {
		return nil
	}
	m.mu.Lock()
	m.draining = true
	m.mu.Unlock()
	done := make(chan struct{})
	go func() { m.inflight.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("mcpvisor cluster: leaving with calls still in flight: %w", ctx.Err())
	}
	if m.left.Swap(true) {
		return err
	}
	// Leave first (the others take the servers over as soon as they see
	// it), then let go of the servers here.
	m.provider.stopServing()
	held := m.local.Status()
	names := make([]string, 0, len(held))
	for _, st := range held {
		names = append(names, st.Name)
	}
	sort.Strings(names)
	for _, name := range names {
		m.placement.push(name, false)
	}
	m.c.Shutdown(true)
	return err
}

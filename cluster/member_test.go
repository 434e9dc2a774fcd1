package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/internal/testports"
	"github.com/mcpvisor/mcpvisor/transports"
)

// freePorts returns n distinct free loopback ports, outside the
// ephemeral range (testports).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	return testports.Free(t, n)
}

// eventLog collects the events of every member of a test.
type eventLog struct {
	mu     sync.Mutex
	events []MemberEvent
	added  chan struct{}
}

func newEventLog() *eventLog { return &eventLog{added: make(chan struct{}, 1)} }

func (l *eventLog) add(ev MemberEvent) {
	l.mu.Lock()
	l.events = append(l.events, ev)
	l.mu.Unlock()
	select {
	case l.added <- struct{}{}:
	default:
	}
}

func (l *eventLog) snapshot() []MemberEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]MemberEvent(nil), l.events...)
}

// waitFor waits until cond holds over the events, or fails saying what.
func (l *eventLog) waitFor(t *testing.T, what string, timeout time.Duration, cond func([]MemberEvent) bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond) // for conditions on time
	defer tick.Stop()
	for {
		if cond(l.snapshot()) {
			return
		}
		select {
		case <-l.added:
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s; events: %v", timeout, what, l.snapshot())
		}
	}
}

// readyOn returns, for each server, the member it last became ready on
// (and was not released from since).
func readyOn(events []MemberEvent) map[string]string {
	on := map[string]string{}
	for _, ev := range events {
		switch ev.Type {
		case MemberReady:
			on[ev.Server] = ev.Member
		case MemberReleased:
			if on[ev.Server] == ev.Member {
				delete(on, ev.Server)
			}
		}
	}
	return on
}

// overlaps returns the servers that had two activations at once: an
// activation on a member while another member's had not been released,
// ignoring members in gone (their activations end with them).
func overlaps(events []MemberEvent, gone map[string]time.Time) []string {
	// The members' events arrive through separate pipes: order them by
	// when they happened.
	events = append([]MemberEvent(nil), events...)
	sort.SliceStable(events, func(i, j int) bool { return events[i].Time.Before(events[j].Time) })
	live := map[string]map[string]bool{} // server → members with a live activation
	var bad []string
	for _, ev := range events {
		if live[ev.Server] == nil {
			live[ev.Server] = map[string]bool{}
		}
		for member, at := range gone {
			if !ev.Time.Before(at) {
				delete(live[ev.Server], member)
			}
		}
		switch ev.Type {
		case MemberActivated:
			if len(live[ev.Server]) > 0 {
				bad = append(bad, fmt.Sprintf("%s on %s while live on %v", ev.Server, ev.Member, live[ev.Server]))
			}
			live[ev.Server][ev.Member] = true
		case MemberReleased:
			delete(live[ev.Server], ev.Member)
		}
	}
	return bad
}

// startMembers starts n members of one cluster on loopback.
func startMembers(t *testing.T, n int, log *eventLog) []*Member {
	t.Helper()
	ports := freePorts(t, 2*n)
	var peers []string
	for i := range n {
		peers = append(peers, fmt.Sprintf("127.0.0.1:%d", ports[n+i]))
	}
	members := make([]*Member, n)
	for i := range n {
		m, err := Start(context.Background(), Options{Port: ports[i], ProviderPort: ports[n+i], Peers: peers, OnMemberEvent: log.add})
		require.NoError(t, err)
		members[i] = m
	}
	return members
}

// mockFleet configures n servers s00… on one mock (serveMock).
func mockFleet(t *testing.T, n int) map[string]mcpvisor.ServerConfig {
	t.Helper()
	mockURL := serveMock(t)
	servers := map[string]mcpvisor.ServerConfig{}
	for i := range n {
		name := fmt.Sprintf("s%02d", i)
		servers[name] = mcpvisor.ServerConfig{Config: transports.Config{Type: transports.TypeHTTP, URL: mockURL + "/" + name}}
	}
	return servers
}

func callEcho(ctx context.Context, m *Member, server string) error {
	res, err := m.CallServerTool(ctx, server, "echo", json.RawMessage(`{"text":"hi"}`))
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("%s: tool error %v", server, res.Content)
	}
	return nil
}

func closeAll(t *testing.T, members ...*Member) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, m := range members {
		require.NoError(t, m.Close(ctx))
	}
}

func itoa(i int) string { return fmt.Sprint(i) }

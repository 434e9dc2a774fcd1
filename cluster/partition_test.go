//go:build unix

package cluster

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAPartitionedMemberThatComesBackRunsNoServerThatMoved: a member cut
// off from the others (its process stopped with SIGSTOP, so it answers
// nothing) long enough that they drop it from the topology and re-home
// its servers, then let go on (SIGCONT). It cannot see that it was
// removed (its own topology still holds everyone) and protoactor blocks
// its id for ever; the others tell it (Removed), and it releases every
// server that moved within 3 s, activates nothing, and says it is fenced.
// Without that it ran its old servers beside their new owners and, once
// gossip's heartbeats expired, activated every server of the cluster.
func TestAPartitionedMemberThatComesBackRunsNoServerThatMoved(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three member processes")
	}
	const servers = 12
	bin := buildMember(t)
	mockURL := serveMock(t)
	log := newEventLog()
	cp := newClusterPorts(t, 3)
	procs := startProcs(t, bin, mockURL, servers, cp, log)
	log.waitFor(t, "all servers ready", 60*time.Second, func(evs []MemberEvent) bool { return len(readyOn(evs)) == servers })
	var cut, via *memberProc
	for _, p := range procs {
		if cut == nil && len(serversOn(log.snapshot(), p.id)) > 0 {
			cut = p
		} else if via == nil {
			via = p
		}
	}
	moved := serversOn(log.snapshot(), cut.id)
	t.Logf("cutting off %s, which runs %v", cut.id, moved)
	stoppedAt := time.Now()
	require.NoError(t, cut.cmd.Process.Signal(syscall.SIGSTOP))
	log.waitFor(t, "the cut-off member's servers ready elsewhere", 60*time.Second, func(evs []MemberEvent) bool {
		return len(readyAt(evs, moved, cut.id, stoppedAt)) == len(moved)
	})
	t.Logf("re-homed %v after the cut", time.Since(stoppedAt).Round(time.Millisecond))
	require.NoError(t, cut.cmd.Process.Signal(syscall.SIGCONT))
	resumedAt := time.Now()
	log.waitFor(t, "the member that came back released every server it ran and is fenced", 10*time.Second, func(evs []MemberEvent) bool {
		released, fenced := map[string]bool{}, false
		for _, ev := range evs {
			if ev.Member == cut.id && ev.Time.After(stoppedAt) {
				released[ev.Server] = released[ev.Server] || ev.Type == MemberReleased
				fenced = fenced || ev.Type == MemberFenced
			}
		}
		for _, name := range moved {
			if !released[name] {
				return false
			}
		}
		return fenced
	})
	t.Logf("the member that came back released its %d servers %v after it resumed", len(moved), time.Since(resumedAt).Round(time.Millisecond))
	time.Sleep(7 * time.Second) // testwait:ok not a wait: past gossip's heartbeat expiry (5 s), when it used to activate everything
	for _, ev := range log.snapshot() {
		if ev.Member == cut.id && ev.Time.After(stoppedAt) {
			require.NotEqual(t, MemberActivated, ev.Type, "the member that came back activated %s", ev.Server)
			require.NotEqual(t, MemberReady, ev.Type, "the member that came back connected %s", ev.Server)
		}
	}
	require.Empty(t, overlaps(log.snapshot(), map[string]time.Time{cut.id: stoppedAt}), "two activations of a server at once among the others")
	for name := range readyOn(log.snapshot()) {
		res, _, err := via.call(name)
		require.NoError(t, err)
		require.True(t, res.OK, "a call to %s: %s %s", name, res.Class, res.Error)
	}
}

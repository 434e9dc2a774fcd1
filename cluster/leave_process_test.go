package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// TestAGracefulLeaveUnderLoadFailsNoCall: three member processes, 30
// servers; twelve workers call random servers through member 0 while
// member 2 leaves gracefully, and no call may fail: a leaving member
// either finishes a call it took or refuses it before running it (and
// the caller then tries the new owner). Then a new member joins on
// member 2's ports (calls stopped: a join does not drain yet) and the
// leave is repeated, three leaves a run. The supervise test met a call
// failed with ErrMemberLost during the leave on a loaded machine; run it
// with busy loops beside it (notes/flakes.md).
func TestAGracefulLeaveUnderLoadFailsNoCall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three member processes")
	}
	const servers, rounds, workers = 30, 3, 12
	bin := buildMember(t)
	mockURL := serveMock(t)
	log := newEventLog()
	cp := newClusterPorts(t, 3)
	procs := startProcs(t, bin, mockURL, servers, cp, log)
	via := procs[0]
	for round := range rounds {
		leaver := procs[2]
		log.waitFor(t, "every server ready, some on the member that will leave", 60*time.Second, func(evs []MemberEvent) bool {
			return len(readyOn(evs)) == servers && len(serversOn(evs, leaver.id)) > 0
		})
		leaving := serversOn(log.snapshot(), leaver.id)
		var st loadStats
		stop := make(chan struct{})
		load := runLoad(via, servers, workers, stop, &st)
		time.Sleep(500 * time.Millisecond) // testwait:ok not a wait: calls run before the leave
		leftAt := time.Now()
		resp, err := controlClient.Post("http://"+leaver.control+"/leave", "", nil)
		require.NoError(t, err)
		resp.Body.Close()
		log.waitFor(t, "every server of the leaving member ready on another member", 60*time.Second, func(evs []MemberEvent) bool {
			return len(readyAt(evs, leaving, leaver.id, leftAt)) == len(leaving)
		})
		select {
		case <-leaver.exited:
		case <-time.After(30 * time.Second):
			t.Fatal("the member that left did not exit within 30 s")
		}
		time.Sleep(time.Second) // testwait:ok not a wait: calls run for a second after the leaver exited
		close(stop)
		testwait.CallWithin(t, 30*time.Second, "the load workers to stop (each call is bounded by 15 s)", load.Wait)
		t.Logf("round %d: %d servers handed over; %d calls ok, %d failed", round, len(leaving), st.ok, len(st.failures))
		require.Empty(t, st.hung, "round %d: calls that hung", round)
		require.Empty(t, st.failures, "round %d: calls that failed during the graceful leave of %s", round, leaver.id)
		for _, ev := range log.snapshot() {
			require.False(t, ev.Member == leaver.id && ev.Type == MemberFenced, "round %d: the member that left gracefully took itself for fenced", round)
		}
		if round < rounds-1 {
			procs[2] = startProc(t, bin, mockURL, servers, cp, 2, log)
			joined := procs[2]
			log.waitFor(t, fmt.Sprintf("round %d: servers rebalanced onto the new member", round), 60*time.Second, func(evs []MemberEvent) bool {
				return len(readyOn(evs)) == servers && len(serversOn(evs, joined.id)) > 0
			})
		}
	}
}

//go:build unix

package cluster

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// TestAGracefulLeaveUnderLoadFailsNoCall: three member processes, 30
// servers; twelve workers call random servers through member 0 while
// member 2 leaves gracefully, and no call may fail: a leaving member
// finishes the calls it took and refuses the others before running them
// (the caller then tries the new owner), and a member that knows it
// drains sends it no call any more. A new member then joins on member 2's
// ports (calls stopped: a join does not drain yet) and the next round
// begins.
//
// Round 0 is a plain leave: the leaver exits by itself and does not take
// itself for fenced. In rounds 1 and 2 the leaver stalls right after it
// handed its servers over (SIGSTOP, as a loaded machine or a paused VM
// would, then SIGKILL): a call sent to it from then on would wait for an
// answer that never comes and fail with ErrMemberLost once member 0 sees
// it gone, though it never ran there. The supervise test met that failure
// on a loaded machine.
func TestAGracefulLeaveUnderLoadFailsNoCall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three member processes")
	}
	const servers, rounds, workers = 30, 3, 12
	bin := buildMember(t)
	mockURL := serveMock(t)
	log := newEventLog()
	cp := newClusterPorts(t, 3)
	// Member 0, which the calls go through, polls the membership every
	// 2 s (the others every 0.5 s): it sees the leaver gone up to 2 s
	// after the others, the window in which it could still send it calls.
	procs := []*memberProc{startProc(t, bin, mockURL, servers, cp, 0, log, "-membership-poll", "2s")}
	for i := 1; i < 3; i++ {
		procs = append(procs, startProc(t, bin, mockURL, servers, cp, i, log))
	}
	via := procs[0]
	for round := range rounds {
		leaver, stall := procs[2], round > 0
		log.waitFor(t, "every server ready, some on the member that will leave", 60*time.Second, func(evs []MemberEvent) bool {
			return len(readyOn(evs)) == servers && len(serversOn(evs, leaver.id)) > 0
		})
		leaving := serversOn(log.snapshot(), leaver.id)
		var st loadStats
		var fresh sync.WaitGroup
		stop := make(chan struct{})
		load := runLoad(via, servers, workers, stop, &st)
		time.Sleep(500 * time.Millisecond) // testwait:ok not a wait: calls run before the leave
		leftAt := time.Now()
		leaveDone := make(chan error, 1)
		go func() {
			resp, err := controlClient.Post("http://"+leaver.control+"/leave", "", nil)
			if err == nil {
				resp.Body.Close()
			}
			leaveDone <- err
		}()
		if stall {
			log.waitFor(t, "the leaving member to release a server", 30*time.Second, func(evs []MemberEvent) bool {
				for _, ev := range evs {
					if ev.Member == leaver.id && ev.Type == MemberReleased && ev.Time.After(leftAt) {
						return true
					}
				}
				return false
			})
			// Its answers to the calls it refused or finished are sent
			// by now (they precede the release); it leaves the topology
			// a moment later.
			time.Sleep(100 * time.Millisecond) // testwait:ok not a wait: the answers' flight before the stall
			require.NoError(t, leaver.cmd.Process.Signal(syscall.SIGSTOP))
			// The workers may all be waiting in calls the leaver refused
			// (they try again once the topology names the next owner):
			// start a fresh call to each of its servers now.
			for _, name := range leaving {
				fresh.Add(1)
				go func() {
					defer fresh.Done()
					r, at, err := via.call(name)
					st.mu.Lock()
					defer st.mu.Unlock()
					switch {
					case err != nil:
						st.hung = append(st.hung, fmt.Sprintf("%s at %s: %v", name, at.Format(time.StampMilli), err))
					case r.OK:
						st.ok++
					default:
						st.failures = append(st.failures, fmt.Sprintf("fresh %s %s at %s: %s", r.Class, name, at.Format(time.StampMilli), r.Error))
					}
				}()
			}
		}
		log.waitFor(t, "every server of the leaving member ready on another member", 60*time.Second, func(evs []MemberEvent) bool {
			return len(readyAt(evs, leaving, leaver.id, leftAt)) == len(leaving)
		})
		if stall {
			require.NoError(t, leaver.cmd.Process.Signal(syscall.SIGKILL))
		} else {
			require.NoError(t, testwait.RecvWithin(t, leaveDone, 30*time.Second, "the leave to return"), "the leave")
		}
		select {
		case <-leaver.exited:
		case <-time.After(30 * time.Second):
			t.Fatal("the member that left did not exit within 30 s")
		}
		time.Sleep(time.Second) // testwait:ok not a wait: calls run for a second after the leaver exited
		close(stop)
		testwait.CallWithin(t, 30*time.Second, "the load workers to stop (each call is bounded by 15 s)", load.Wait)
		testwait.CallWithin(t, 30*time.Second, "the fresh calls to end (each is bounded by 15 s)", fresh.Wait)
		t.Logf("round %d (stalled: %v): %d servers handed over; %d calls ok, %d failed", round, stall, len(leaving), st.ok, len(st.failures))
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

package mcpvisor

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/actors/admission"
	"github.com/mcpvisor/mcpvisor/internal/testwait"
)

// TestAConnectsEndHandsItsSlotOn: a connect goroutine's release frees its
// slot and starts the next server in line itself (connectNow straight to
// that server's actor, no registry in between); a release with a stale
// ticket frees nothing and starts nobody.
func TestAConnectsEndHandsItsSlotOn(t *testing.T) {
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	got := make(chan string, 4)
	probe := func(name string) *actor.PID {
		return sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if m, ok := c.Message().(connectNow); ok && m.ticket > 0 {
				got <- name
			}
		}))
	}
	g := newAdmissionGate(1, 1)
	g.root = sys.Root
	g.enqueue("a", admission.Local, probe("a"))
	g.enqueue("b", admission.Local, probe("b"))
	g.enqueue("c", admission.Local, probe("c"))
	g.pump()
	assert.Equal(t, "a", testwait.Recv(t, got, "a admitted first"))

	g.release("b", 1) // not b's ticket: b is still in line
	g.release("a", 99)
	st := g.stats() // admission happens inside release: the counts tell at once
	require.Equal(t, [admission.NumClasses]int{1, 0}, st.Running, "a stale release frees nothing")
	require.Equal(t, [admission.NumClasses]int{2, 0}, st.Queued, "and admits nobody")

	g.release("a", 1)
	assert.Equal(t, "b", testwait.Recv(t, got, "a's slot handed on to b by a's release"))
	g.settled("a", 1) // the registry's later report of a's end frees nothing more
	require.Equal(t, [admission.NumClasses]int{1, 0}, g.stats().Running)
	assert.False(t, g.waiting("a"))
	assert.True(t, g.waiting("c"))
}

package admission

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// step is one thing that happens to a scheduler in a table test.
type step struct {
	enqueue []string // names to put in line (class by first letter: l… local, r… remote)
	remove  string   // a name to take out
	settle  string   // a name whose current connect settles
	stale   string   // a name that reports a connect from before its current ticket
	admit   []string // what Next admits after this step, in order
}

func classFor(name string) Class {
	if name[0] == 'r' {
		return Remote
	}
	return Local
}

func TestScheduler(t *testing.T) {
	tests := []struct {
		name          string
		local, remote int
		steps         []step
		want          Stats
	}{
		{
			name:  "admits up to the limit of each class, local first, in arrival order",
			local: 2, remote: 1,
			steps: []step{{enqueue: []string{"r1", "l1", "r2", "l2", "l3"}, admit: []string{"l1", "l2", "r1"}}},
			want:  Stats{Limit: [NumClasses]int{2, 1}, Running: [NumClasses]int{2, 1}, Peak: [NumClasses]int{2, 1}, Queued: [NumClasses]int{1, 1}},
		},
		{
			name:  "a slot frees as soon as one connect settles, not when its batch does",
			local: 2, remote: 1,
			steps: []step{
				{enqueue: []string{"l1", "l2", "l3", "l4"}, admit: []string{"l1", "l2"}},
				{settle: "l2", admit: []string{"l3"}},
				{settle: "l1", admit: []string{"l4"}},
			},
			want: Stats{Limit: [NumClasses]int{2, 1}, Running: [NumClasses]int{2, 0}, Peak: [NumClasses]int{2, 0}},
		},
		{
			name:  "a name is in line or admitted once, however often it is enqueued",
			local: 1, remote: 1,
			steps: []step{
				{enqueue: []string{"l1", "l1", "l2", "l1"}, admit: []string{"l1"}},
				{enqueue: []string{"l1"}},
				{settle: "l1", admit: []string{"l2"}},
			},
			want: Stats{Limit: [NumClasses]int{1, 1}, Running: [NumClasses]int{1, 0}, Peak: [NumClasses]int{1, 0}},
		},
		{
			name:  "a report about an earlier connect of the same name frees nothing",
			local: 1, remote: 1,
			steps: []step{
				{enqueue: []string{"l1", "l2"}, admit: []string{"l1"}},
				{stale: "l1"},
			},
			want: Stats{Limit: [NumClasses]int{1, 1}, Running: [NumClasses]int{1, 0}, Peak: [NumClasses]int{1, 0}, Queued: [NumClasses]int{1, 0}},
		},
		{
			name:  "removing a waiting name takes it out of line; removing an admitted one frees its slot",
			local: 1, remote: 1,
			steps: []step{
				{enqueue: []string{"l1", "l2", "l3"}, admit: []string{"l1"}},
				{remove: "l2"},
				{remove: "l1", admit: []string{"l3"}},
			},
			want: Stats{Limit: [NumClasses]int{1, 1}, Running: [NumClasses]int{1, 0}, Peak: [NumClasses]int{1, 0}},
		},
		{
			name:  "a limit below one admits one at a time",
			local: 0, remote: -1,
			steps: []step{{enqueue: []string{"l1", "l2", "r1", "r2"}, admit: []string{"l1", "r1"}}},
			want:  Stats{Limit: [NumClasses]int{1, 1}, Running: [NumClasses]int{1, 1}, Peak: [NumClasses]int{1, 1}, Queued: [NumClasses]int{1, 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.local, tt.remote)
			tickets := map[string]uint64{}
			for i, st := range tt.steps {
				for _, n := range st.enqueue {
					s.Enqueue(n, classFor(n))
				}
				if st.remove != "" {
					s.Remove(st.remove)
					assert.False(t, s.Waiting(st.remove), "step %d: %s is neither in line nor admitted after Remove", i, st.remove)
				}
				if st.settle != "" {
					assert.True(t, s.Settled(st.settle, tickets[st.settle]), "step %d: %s's slot frees", i, st.settle)
				}
				if st.stale != "" {
					assert.False(t, s.Settled(st.stale, tickets[st.stale]-1), "step %d: an earlier ticket of %s frees nothing", i, st.stale)
					assert.True(t, s.Admitted(st.stale), "step %d: %s keeps its slot", i, st.stale)
				}
				var admitted []string
				for {
					n, ticket, ok := s.Next()
					if !ok {
						break
					}
					assert.Greater(t, ticket, tickets[n], "step %d: %s's ticket is new", i, n)
					tickets[n] = ticket
					admitted = append(admitted, n)
					assert.True(t, s.Admitted(n) && !s.Queued(n), "step %d: %s holds a slot and is out of line", i, n)
				}
				assert.Equal(t, st.admit, admitted, "step %d admits", i)
			}
			assert.Equal(t, tt.want, s.Stats())
		})
	}
}

// Tickets are never reused, across names and across admissions of one name.
func TestSchedulerTicketsAreNeverReused(t *testing.T) {
	s := New(1, 1)
	seen := map[uint64]bool{}
	for range 3 {
		s.Enqueue("l1", Local)
		s.Enqueue("r1", Remote)
		for {
			n, ticket, ok := s.Next()
			if !ok {
				break
			}
			assert.False(t, seen[ticket], "ticket %d reused", ticket)
			seen[ticket] = true
			s.Settled(n, ticket)
		}
	}
	assert.Len(t, seen, 6)
}

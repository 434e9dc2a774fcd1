// Package admission is the connect scheduler of a supervisor: it decides
// which waiting server may start connecting next, so that at most a
// configured number of connects of each class (local processes, remote
// endpoints) run at once. It is a plain data structure with no goroutine,
// no clock and no actor: the registry actor owns one and tells it what
// happened.
package admission

// Class separates local servers (which compete for this machine's CPU
// when they start) from remote ones. Each class has its own limit.
type Class int

const (
	// Local is a server the supervisor starts on this machine (stdio,
	// in-process).
	Local Class = iota
	// Remote is a server reached over the network (HTTP, SSE, WebSocket).
	Remote
	// NumClasses is the number of classes; Stats arrays are indexed by Class.
	NumClasses
)

// String returns "local" or "remote".
func (c Class) String() string { return [...]string{"local", "remote"}[c] }

// Stats are the scheduler's counters, indexed by Class.
type Stats struct {
	Limit   [NumClasses]int
	Running [NumClasses]int
	Peak    [NumClasses]int // the most connects that ever ran at once
	Queued  [NumClasses]int
}

// slot is an admitted connect: the ticket it was given and its class.
type slot struct {
	ticket uint64
	class  Class
}

// Scheduler is a FIFO line per class in front of a fixed number of
// connect slots. A name is at most once in line or admitted; a slot frees
// as soon as that connect settles, not when a batch does. Tickets number
// the admissions (from 1, never reused), so a late report about an
// earlier connect of the same name does not free the current one's slot.
//
// Concurrency: none. A Scheduler belongs to one goroutine (the registry
// actor's); every field is touched only by its methods.
type Scheduler struct {
	limits  [NumClasses]int
	line    [NumClasses][]string
	queued  map[string]Class // names in line, with their class
	running map[string]slot  // names admitted and not yet settled
	busy    [NumClasses]int  // len of running, by class
	peak    [NumClasses]int
	tickets uint64
}

// New returns a scheduler that admits at most local and remote connects
// of each class at once. A limit below 1 admits one at a time.
func New(local, remote int) *Scheduler {
	return &Scheduler{
		limits:  [NumClasses]int{Local: max(local, 1), Remote: max(remote, 1)},
		queued:  map[string]Class{},
		running: map[string]slot{},
	}
}

// Enqueue puts name in its class's line, unless it is already in line or
// admitted (so that calling it again is harmless).
func (s *Scheduler) Enqueue(name string, c Class) {
	if s.Waiting(name) {
		return
	}
	s.queued[name] = c
	s.line[c] = append(s.line[c], name)
}

// Waiting reports whether name is in line or admitted.
func (s *Scheduler) Waiting(name string) bool {
	if _, ok := s.queued[name]; ok {
		return true
	}
	_, ok := s.running[name]
	return ok
}

// Queued reports whether name is in line (not yet admitted).
func (s *Scheduler) Queued(name string) bool {
	_, ok := s.queued[name]
	return ok
}

// Admitted reports whether name holds a slot.
func (s *Scheduler) Admitted(name string) bool {
	_, ok := s.running[name]
	return ok
}

// Remove takes name out of line and frees its slot, if it held one: the
// server was removed, or its connect is no longer wanted.
func (s *Scheduler) Remove(name string) {
	if c, ok := s.queued[name]; ok {
		delete(s.queued, name)
		line := s.line[c]
		for i, n := range line {
			if n == name {
				s.line[c] = append(line[:i:i], line[i+1:]...)
				break
			}
		}
	}
	s.free(name)
}

// Settled reports that the connect of name admitted with ticket ended
// (in any state): its slot frees. A ticket of an earlier admission is
// ignored. It reports whether a slot was freed.
func (s *Scheduler) Settled(name string, ticket uint64) bool {
	if sl, ok := s.running[name]; !ok || sl.ticket != ticket {
		return false
	}
	return s.free(name)
}

func (s *Scheduler) free(name string) bool {
	sl, ok := s.running[name]
	if !ok {
		return false
	}
	delete(s.running, name)
	s.busy[sl.class]--
	return true
}

// Next admits the first name in line of a class with a free slot and
// returns it with its ticket; ok is false when nothing can be admitted.
// Local servers are admitted before remote ones.
func (s *Scheduler) Next() (name string, ticket uint64, ok bool) {
	for c := range NumClasses {
		if s.busy[c] >= s.limits[c] || len(s.line[c]) == 0 {
			continue
		}
		name = s.line[c][0]
		s.line[c] = s.line[c][1:]
		delete(s.queued, name)
		s.tickets++
		s.running[name] = slot{ticket: s.tickets, class: c}
		s.busy[c]++
		s.peak[c] = max(s.peak[c], s.busy[c])
		return name, s.tickets, true
	}
	return "", 0, false
}

// Stats returns the counters.
func (s *Scheduler) Stats() Stats {
	st := Stats{Limit: s.limits, Running: s.busy, Peak: s.peak}
	for c := range NumClasses {
		st.Queued[c] = len(s.line[c])
	}
	return st
}

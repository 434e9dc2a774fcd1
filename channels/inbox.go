package channels

import (
	"context"
	"errors"
	"sync"
	"time"
)

// DefaultCapacity is an inbox's capacity when none is given.
const DefaultCapacity = 1000

// ErrClosed: the inbox (or its hub) has been closed.
var ErrClosed = errors.New("channels: inbox closed")

// Hub fans channel messages out to inboxes. Publish never blocks: each
// inbox is bounded and drops its oldest message when full, counting it.
//
// Concurrency: every method is safe for concurrent use. mu guards the
// sequence number, the set of inboxes and closed; each inbox has its own
// lock, always taken after the hub's.
type Hub struct {
	mu      sync.Mutex
	seq     uint64
	inboxes map[*Inbox]struct{}
	closed  bool
	now     func() time.Time
}

// NewHub returns a hub with no inboxes.
func NewHub() *Hub {
	return &Hub{inboxes: map[*Inbox]struct{}{}, now: time.Now}
}

// Publish numbers m, stamps it and puts it in every open inbox, in
// publication order. It returns the message as delivered (Seq and Time
// set). It never blocks on a subscriber; a closed hub drops m.
func (h *Hub) Publish(m Message) Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return m
	}
	h.seq++
	m.Seq = h.seq
	if m.Time.IsZero() {
		m.Time = h.now()
	}
	for in := range h.inboxes {
		in.push(m)
	}
	return m
}

// Subscribe opens an inbox that receives every message published from now
// on. capacity bounds it (zero or less means DefaultCapacity). A closed
// hub returns a closed inbox.
func (h *Hub) Subscribe(capacity int) *Inbox {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	in := &Inbox{hub: h, ring: make([]Message, capacity), signal: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		in.closed = true
		return in
	}
	h.inboxes[in] = struct{}{}
	return in
}

// Published returns how many messages the hub has accepted.
func (h *Hub) Published() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seq
}

// Close closes every inbox: waiters return what is still queued, then
// ErrClosed. Later messages are dropped. Close is idempotent.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for in := range h.inboxes {
		in.mu.Lock()
		in.close()
		in.mu.Unlock()
	}
	clear(h.inboxes)
}

// Filter selects the messages a waiter takes. Nil takes any message.
type Filter func(Message) bool

// FromServer takes the messages of one server.
func FromServer(server string) Filter {
	return func(m Message) bool { return m.Server == server }
}

// Inbox is one subscriber's queue of channel messages: bounded, oldest
// first. When it is full the oldest message is dropped to make room, and
// counted (Stats.Dropped). Several goroutines may Wait on it at once;
// each message is taken by exactly one of them.
//
// Concurrency: safe for concurrent use. mu guards every field below it.
type Inbox struct {
	hub *Hub

	mu       sync.Mutex
	ring     []Message // circular; ring[head] is the oldest of n
	head, n  int
	dropped  uint64
	received uint64
	taken    uint64
	closed   bool
	// signal is closed (and replaced) whenever a message arrives or the
	// inbox closes, waking every waiter to look again.
	signal chan struct{}
}

// Stats counts what an inbox received.
type Stats struct {
	Received uint64 // messages put in the inbox
	Taken    uint64 // messages returned by Wait
	Dropped  uint64 // messages dropped, oldest first, because the inbox was full
	Queued   int    // messages waiting now
}

// push adds m, dropping the oldest message when full. Called by the hub
// with its lock held.
func (in *Inbox) push(m Message) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return
	}
	in.received++
	if in.n == len(in.ring) {
		in.head = (in.head + 1) % len(in.ring)
		in.n--
		in.dropped++
	}
	in.ring[(in.head+in.n)%len(in.ring)] = m
	in.n++
	close(in.signal)
	in.signal = make(chan struct{})
}

// Wait returns the oldest queued message that filter takes (nil takes
// any), removing it from the inbox, and blocks until one arrives, the
// context ends (its error) or the inbox closes (ErrClosed, once no queued
// message matches).
func (in *Inbox) Wait(ctx context.Context, filter Filter) (Message, error) {
	for {
		in.mu.Lock()
		if m, ok := in.take(filter); ok {
			in.mu.Unlock()
			return m, nil
		}
		if in.closed {
			in.mu.Unlock()
			return Message{}, ErrClosed
		}
		signal := in.signal
		in.mu.Unlock()
		select {
		case <-signal:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
	}
}

// TryTake returns the oldest queued message filter takes, without
// waiting.
func (in *Inbox) TryTake(filter Filter) (Message, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.take(filter)
}

// take removes and returns the oldest message filter takes. in.mu held.
func (in *Inbox) take(filter Filter) (Message, bool) {
	size := len(in.ring)
	for i := 0; i < in.n; i++ {
		m := in.ring[(in.head+i)%size]
		if filter != nil && !filter(m) {
			continue
		}
		if i == 0 {
			in.ring[in.head] = Message{}
			in.head = (in.head + 1) % size
		} else {
			// Close the gap: shift the newer messages down by one.
			for j := i; j < in.n-1; j++ {
				in.ring[(in.head+j)%size] = in.ring[(in.head+j+1)%size]
			}
			in.ring[(in.head+in.n-1)%size] = Message{}
		}
		in.n--
		in.taken++
		return m, true
	}
	return Message{}, false
}

// Stats returns the inbox's counters.
func (in *Inbox) Stats() Stats {
	in.mu.Lock()
	defer in.mu.Unlock()
	return Stats{Received: in.received, Taken: in.taken, Dropped: in.dropped, Queued: in.n}
}

// Dropped returns how many messages the inbox dropped because it was
// full.
func (in *Inbox) Dropped() uint64 { return in.Stats().Dropped }

// Close unsubscribes the inbox. Waiters get what is still queued, then
// ErrClosed. Close is idempotent.
func (in *Inbox) Close() {
	h := in.hub
	h.mu.Lock()
	delete(h.inboxes, in)
	h.mu.Unlock()
	in.mu.Lock()
	defer in.mu.Unlock()
	in.close()
}

// close marks the inbox closed and wakes its waiters. in.mu held.
func (in *Inbox) close() {
	if !in.closed {
		in.closed = true
		close(in.signal)
	}
}

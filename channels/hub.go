package channels

import (
	"errors"
	"sync"
	"time"
)

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

// Publish numbers m, stamps it and puts it in every open inbox whose
// filter takes it, in publication order. It returns the message as
// delivered (Seq and Time set). It never blocks on a subscriber; a closed
// hub drops m.
func (h *Hub) Publish(m Message) Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return m
	}
	h.seq++
	m.Seq = h.seq
	m.Dropped = 0
	if m.Time.IsZero() {
		m.Time = h.now()
	}
	for in := range h.inboxes {
		in.push(m)
	}
	return m
}

// Subscribe opens an inbox that receives every message published from now
// on, keeping at most capacity messages of each server (zero or less
// means DefaultCapacity). It is Open with only InboxOptions.Capacity set.
func (h *Hub) Subscribe(capacity int) *Inbox {
	return h.Open(InboxOptions{Capacity: capacity})
}

// Open opens an inbox that receives the messages published from now on
// that o.Filter takes, bounded as o says. A closed hub returns a closed
// inbox.
func (h *Hub) Open(o InboxOptions) *Inbox {
	in := newInbox(h, o)
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

// Filter selects messages: the ones an inbox keeps, or the ones a waiter
// takes. Nil takes any message.
type Filter func(Message) bool

// FromServer takes the messages of one server.
func FromServer(server string) Filter {
	return func(m Message) bool { return m.Server == server }
}

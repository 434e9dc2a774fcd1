package channels

import (
	"context"
	"maps"
	"slices"
	"sync"
)

// Bounds of an inbox, per server, when InboxOptions leaves them zero.
const (
	// DefaultCapacity is how many messages of one server an inbox keeps.
	DefaultCapacity = 1000
	// DefaultMaxBytes is how many bytes of messages (content, meta keys
	// and values) of one server an inbox keeps.
	DefaultMaxBytes = 16 << 20
)

// InboxOptions configure an inbox (Hub.Open). The zero value keeps every
// message, up to DefaultCapacity messages and DefaultMaxBytes bytes of
// each server.
type InboxOptions struct {
	// Capacity bounds the messages kept per server; zero or less means
	// DefaultCapacity.
	Capacity int
	// MaxBytes bounds the bytes kept per server (content, meta keys and
	// values); zero means DefaultMaxBytes, negative no byte bound. The
	// newest message is always kept, whatever its size.
	MaxBytes int
	// Filter selects the messages the inbox keeps; nil keeps all.
	Filter Filter
}

// Inbox is one subscriber's queue of channel messages. It keeps a bounded
// queue per server: when a server's queue is full its oldest message is
// dropped to make room, and counted (Stats.Dropped, and Message.Dropped
// of the next message of that server delivered), so that a chatty server
// never pushes out another server's messages. Messages wait in the inbox
// until taken: a Wait returns the oldest queued message its filter takes
// at once, or blocks for the next one. Several goroutines may Wait on one
// inbox; each message is taken by exactly one of them.
//
// Concurrency: safe for concurrent use. mu guards every field below it.
type Inbox struct {
	hub      *Hub
	filter   Filter
	capacity int
	maxBytes int

	mu       sync.Mutex
	queues   map[string]*queue // by server; kept when empty, for the counters
	queued   int
	received uint64
	taken    uint64
	dropped  uint64
	closed   bool
	// signal is closed (and replaced) whenever a message arrives or the
	// inbox closes, waking every waiter to look again.
	signal chan struct{}
}

func newInbox(h *Hub, o InboxOptions) *Inbox {
	if o.Capacity <= 0 {
		o.Capacity = DefaultCapacity
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	return &Inbox{hub: h, filter: o.Filter, capacity: o.Capacity, maxBytes: o.MaxBytes,
		queues: map[string]*queue{}, signal: make(chan struct{})}
}

// Stats counts what an inbox received.
type Stats struct {
	Received uint64 `json:"received"` // messages put in the inbox
	Taken    uint64 `json:"taken"`    // messages delivered (by Wait, WaitN, TryTake, TakeN)
	Dropped  uint64 `json:"dropped"`  // messages dropped, oldest first, because their server's queue was full
	Queued   int    `json:"queued"`   // messages waiting now
}

// ServerStats counts what an inbox received from one server.
type ServerStats struct {
	Server string `json:"server"`
	Stats
}

// push adds m to its server's queue, dropping that queue's oldest
// messages to stay within bounds. Called by the hub with its lock held.
func (in *Inbox) push(m Message) {
	if in.filter != nil && !in.filter(m) {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return
	}
	q := in.queues[m.Server]
	if q == nil {
		q = &queue{}
		in.queues[m.Server] = q
	}
	before, dropped := q.len(), q.dropped
	q.push(m, in.capacity, in.maxBytes)
	in.received++
	in.dropped += q.dropped - dropped
	in.queued += q.len() - before
	close(in.signal)
	in.signal = make(chan struct{})
}

// Wait returns the oldest queued message that filter takes (nil takes
// any), removing it from the inbox, and blocks until one arrives, the
// context ends (its error) or the inbox closes (ErrClosed, once no queued
// message matches). The message's Dropped says how many messages of its
// server were dropped since the previous one delivered.
func (in *Inbox) Wait(ctx context.Context, filter Filter) (Message, error) {
	ms, err := in.WaitN(ctx, filter, 1)
	if err != nil {
		return Message{}, err
	}
	return ms[0], nil
}

// WaitN is Wait for up to n messages (at least one): it blocks like
// Wait until a message filter takes is queued, then returns it with the
// other queued messages filter takes, oldest first, up to n in all.
func (in *Inbox) WaitN(ctx context.Context, filter Filter, n int) ([]Message, error) {
	for {
		in.mu.Lock()
		if ms := in.takeN(filter, n); len(ms) > 0 {
			in.mu.Unlock()
			return ms, nil
		}
		if in.closed {
			in.mu.Unlock()
			return nil, ErrClosed
		}
		signal := in.signal
		in.mu.Unlock()
		select {
		case <-signal:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// TryTake returns the oldest queued message filter takes, without
// waiting.
func (in *Inbox) TryTake(filter Filter) (Message, bool) {
	ms := in.TakeN(filter, 1)
	if len(ms) == 0 {
		return Message{}, false
	}
	return ms[0], true
}

// TakeN returns up to n queued messages filter takes, oldest first,
// without waiting (none: an empty slice).
func (in *Inbox) TakeN(filter Filter, n int) []Message {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.takeN(filter, n)
}

// takeN removes and returns up to n (at least one) of the oldest
// messages filter takes, across the servers' queues. in.mu held.
func (in *Inbox) takeN(filter Filter, n int) []Message {
	var out []Message
	for len(out) < max(n, 1) {
		var from *queue
		at, seq := -1, uint64(0)
		for _, q := range in.queues {
			if q.len() == 0 {
				continue
			}
			if i := q.first(filter); i >= 0 && (from == nil || q.at(i).Seq < seq) {
				from, at, seq = q, i, q.at(i).Seq
			}
		}
		if from == nil {
			break
		}
		out = append(out, from.take(at))
		in.queued--
		in.taken++
	}
	return out
}

// Stats returns the inbox's counters.
func (in *Inbox) Stats() Stats {
	in.mu.Lock()
	defer in.mu.Unlock()
	return Stats{Received: in.received, Taken: in.taken, Dropped: in.dropped, Queued: in.queued}
}

// ServerStats returns the inbox's counters per server, sorted by server
// name.
func (in *Inbox) ServerStats() []ServerStats {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]ServerStats, 0, len(in.queues))
	for _, name := range slices.Sorted(maps.Keys(in.queues)) {
		q := in.queues[name]
		out = append(out, ServerStats{Server: name, Stats: Stats{Received: q.received, Taken: q.taken, Dropped: q.dropped, Queued: q.len()}})
	}
	return out
}

// Dropped returns how many messages the inbox dropped because a server's
// queue was full.
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

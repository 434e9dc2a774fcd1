package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor"
)

// busKeep is how many events a cluster member keeps for
// subscribers that resume (FromSequence).
const busKeep = 1024

// eventBus is a Member's event stream: events numbered by the
// member, the last busKeep kept for resuming subscribers, each
// subscriber a bounded channel that never blocks the publisher (a
// subscriber that falls behind loses events and gets a gap event saying
// how many).
//
// Concurrency: every method is safe for concurrent use; mu guards
// everything, and channels are sent to and closed only under mu.
type eventBus struct {
	mu     sync.Mutex
	seq    uint64
	kept   []mcpvisor.Event // the newest last
	subs   map[*busSub]struct{}
	buffer int
	closed bool
	done   chan struct{} // closed by close
}

type busSub struct {
	ch      chan mcpvisor.Event
	dropped uint64 // events lost since the last delivery
}

func newEventBus(buffer int) *eventBus {
	if buffer <= 0 {
		buffer = 256
	}
	return &eventBus{subs: map[*busSub]struct{}{}, buffer: buffer, done: make(chan struct{})}
}

// publish numbers the event mk builds from its header and delivers it.
func (b *eventBus) publish(typ mcpvisor.EventType, server string, mk func(mcpvisor.EventHeader) mcpvisor.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.seq++
	ev := mk(mcpvisor.EventHeader{Seq: b.seq, Time: time.Now(), Type: typ, Server: server})
	b.kept = append(b.kept, ev)
	if len(b.kept) > busKeep {
		b.kept = b.kept[len(b.kept)-busKeep:]
	}
	for s := range b.subs {
		s.deliver(ev)
	}
}

// deliver sends ev, preceded by a gap event when events were lost, or
// counts it lost when the subscriber's buffer is full.
func (s *busSub) deliver(ev mcpvisor.Event) {
	if s.dropped > 0 {
		gap := &mcpvisor.GapEvent{EventHeader: mcpvisor.EventHeader{Time: time.Now(), Type: mcpvisor.EventGap}, Dropped: s.dropped, GapReason: mcpvisor.GapSlowSubscriber}
		select {
		case s.ch <- gap:
			s.dropped = 0
		default:
			s.dropped++
			return
		}
	}
	select {
	case s.ch <- ev:
	default:
		s.dropped++
	}
}

// subscribe returns a new subscriber's channel, first replaying the kept
// events after seq after when resume is set.
func (b *eventBus) subscribe(ctx context.Context, resume bool, after uint64, buffer int) <-chan mcpvisor.Event {
	if buffer <= 0 {
		buffer = b.buffer
	}
	s := &busSub{ch: make(chan mcpvisor.Event, buffer+busKeep+1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		close(s.ch)
		return s.ch
	}
	if resume {
		if len(b.kept) > 0 && after+1 < b.kept[0].Header().Seq {
			lost := b.kept[0].Header().Seq - after - 1
			s.ch <- &mcpvisor.GapEvent{EventHeader: mcpvisor.EventHeader{Time: time.Now(), Type: mcpvisor.EventGap}, Dropped: lost, GapReason: mcpvisor.GapCursorTooOld}
		}
		for _, ev := range b.kept {
			if ev.Header().Seq > after {
				s.ch <- ev
			}
		}
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-b.done:
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[s]; ok {
			delete(b.subs, s)
			close(s.ch)
		}
	}()
	return s.ch
}

// close ends every subscription.
func (b *eventBus) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	close(b.done)
	for s := range b.subs {
		delete(b.subs, s)
		close(s.ch)
	}
}

package mcpvisor

import (
	"context"
	"sync"
	"time"
)

// clusterBusKeep is how many events a cluster member keeps for
// subscribers that resume (FromSequence).
const clusterBusKeep = 1024

// clusterBus is a ClusterMember's event stream: events numbered by the
// member, the last clusterBusKeep kept for resuming subscribers, each
// subscriber a bounded channel that never blocks the publisher (a
// subscriber that falls behind loses events and gets a gap event saying
// how many).
//
// Concurrency: every method is safe for concurrent use; mu guards
// everything, and channels are sent to and closed only under mu.
type clusterBus struct {
	mu     sync.Mutex
	seq    uint64
	kept   []Event // the newest last
	subs   map[*busSub]struct{}
	buffer int
	closed bool
	done   chan struct{} // closed by close
}

type busSub struct {
	ch      chan Event
	dropped uint64 // events lost since the last delivery
}

func newClusterBus(buffer int) *clusterBus {
	if buffer <= 0 {
		buffer = 256
	}
	return &clusterBus{subs: map[*busSub]struct{}{}, buffer: buffer, done: make(chan struct{})}
}

// publish numbers the event mk builds from its header and delivers it.
func (b *clusterBus) publish(typ EventType, server string, mk func(EventHeader) Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.seq++
	ev := mk(EventHeader{Seq: b.seq, Time: time.Now(), Type: typ, Server: server})
	b.kept = append(b.kept, ev)
	if len(b.kept) > clusterBusKeep {
		b.kept = b.kept[len(b.kept)-clusterBusKeep:]
	}
	for s := range b.subs {
		s.deliver(ev)
	}
}

// deliver sends ev, preceded by a gap event when events were lost, or
// counts it lost when the subscriber's buffer is full.
func (s *busSub) deliver(ev Event) {
	if s.dropped > 0 {
		gap := &GapEvent{EventHeader: EventHeader{Time: time.Now(), Type: EventGap}, Dropped: s.dropped, GapReason: GapSlowSubscriber}
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
func (b *clusterBus) subscribe(ctx context.Context, resume bool, after uint64, buffer int) <-chan Event {
	if buffer <= 0 {
		buffer = b.buffer
	}
	s := &busSub{ch: make(chan Event, buffer+clusterBusKeep+1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		close(s.ch)
		return s.ch
	}
	if resume {
		if len(b.kept) > 0 && after+1 < b.kept[0].Header().Seq {
			lost := b.kept[0].Header().Seq - after - 1
			s.ch <- &GapEvent{EventHeader: EventHeader{Time: time.Now(), Type: EventGap}, Dropped: lost, GapReason: GapCursorTooOld}
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
func (b *clusterBus) close() {
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

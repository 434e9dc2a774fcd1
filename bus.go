package mcpvisor

import "time"

// bus is the registry's event stream: it numbers events, keeps the latest
// ones in a ring for subscribers that resume from a cursor, and delivers
// to every subscriber without ever blocking. It is owned by the registry
// actor; no other goroutine touches it.
type bus struct {
	seq  uint64
	ring []eventRecord // circular once full; ring[next] is the oldest
	next int
	full bool
	subs map[*subscriber]struct{}
}

// subscriber is one event consumer: offer puts an event into its
// buffered channel without blocking (false when the channel is full: the
// event is dropped and counted, and a gap event precedes the next one
// delivered), end closes the channel. Both run on the registry's
// goroutine only (or on Subscribe's, before the registry knows it).
//
// Concurrency: offer, end, dropped and tooOld belong to the registry
// goroutine; the subscriber's goroutine only receives from the channel.
type subscriber struct {
	offer   func(eventRecord) bool
	end     func()
	dropped uint64 // registry goroutine only
	// tooOld is set while the dropped events include some its resume
	// cursor asked for but the ring no longer held (registry goroutine
	// only).
	tooOld bool
}

// gap is the marker that tells s how many events it lost, and why.
func (s *subscriber) gap() eventRecord {
	reason := GapSlowSubscriber
	if s.tooOld {
		reason = GapCursorTooOld
	}
	return eventRecord{Type: EventGap, Time: time.Now(), Dropped: s.dropped, GapReason: reason}
}

func newBus(size int) *bus {
	return &bus{ring: make([]eventRecord, 0, size), subs: map[*subscriber]struct{}{}}
}

// publish numbers ev, remembers it and delivers it.
func (b *bus) publish(ev eventRecord) {
	b.seq++
	ev.Seq = b.seq
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	if !b.full {
		b.ring = append(b.ring, ev)
		b.full = len(b.ring) == cap(b.ring)
	} else {
		b.ring[b.next] = ev
		b.next = (b.next + 1) % len(b.ring)
	}
	for s := range b.subs {
		s.deliver(ev)
	}
}

// add registers s; when resume is set, it first replays the remembered
// events after sequence number after (and a gap for those forgotten).
func (b *bus) add(s *subscriber, resume bool, after uint64) {
	if resume {
		past := b.since(after)
		if len(past) > 0 && past[0].Seq > after+1 {
			s.dropped += past[0].Seq - after - 1
			s.tooOld = true
		} else if len(past) == 0 && b.seq > after {
			s.dropped += b.seq - after
			s.tooOld = true
		}
		for _, ev := range past {
			s.deliver(ev)
		}
	}
	b.subs[s] = struct{}{}
}

// since returns the remembered events with Seq > after, oldest first.
func (b *bus) since(after uint64) []eventRecord {
	ordered := b.ring
	if b.full {
		ordered = append(append([]eventRecord(nil), b.ring[b.next:]...), b.ring[:b.next]...)
	}
	for i, ev := range ordered {
		if ev.Seq > after {
			return ordered[i:]
		}
	}
	return nil
}

// flushGaps tries to tell every subscriber that lost events how many,
// and reports whether some still could not be told (their buffer is
// still full).
func (b *bus) flushGaps() (pending bool) {
	for s := range b.subs {
		if s.dropped == 0 {
			continue
		}
		if s.offer(s.gap()) {
			s.dropped, s.tooOld = 0, false
		} else {
			pending = true
		}
	}
	return pending
}

// hasDrops reports whether some subscriber has lost events it has not
// been told about.
func (b *bus) hasDrops() bool {
	for s := range b.subs {
		if s.dropped > 0 {
			return true
		}
	}
	return false
}

// remove unregisters s and closes its channel.
func (b *bus) remove(s *subscriber) {
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		s.end()
	}
}

// closeAll ends every subscription.
func (b *bus) closeAll() {
	for s := range b.subs {
		b.remove(s)
	}
}

func (s *subscriber) deliver(ev eventRecord) {
	if s.dropped > 0 {
		if !s.offer(s.gap()) {
			s.dropped++
			return
		}
		s.dropped, s.tooOld = 0, false
	}
	if !s.offer(ev) {
		s.dropped++
	}
}

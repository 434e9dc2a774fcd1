package channels

// queue holds one server's messages in an inbox, oldest first, within
// the inbox's bounds. Not safe for concurrent use: the inbox's lock
// guards it.
type queue struct {
	msgs  []Message // msgs[head:] are queued, oldest first
	head  int
	bytes int // size of the queued messages (see size)

	received uint64 // messages of this server the inbox kept
	taken    uint64 // messages delivered
	dropped  uint64 // messages dropped, oldest first, to stay within bounds
	// unreported counts the drops not yet reported by a delivery (see
	// Message.Dropped).
	unreported uint64
}

// size is what a message counts against InboxOptions.MaxBytes: its
// content and its meta keys and values.
func size(m Message) int {
	n := len(m.Content)
	for k, v := range m.Meta {
		n += len(k) + len(v)
	}
	return n
}

func (q *queue) len() int { return len(q.msgs) - q.head }

// push appends m and drops the oldest messages until the queue is within
// capacity messages and maxBytes bytes (maxBytes < 0: no byte bound). A
// message larger than maxBytes by itself is kept alone: the newest
// message always survives.
func (q *queue) push(m Message, capacity, maxBytes int) {
	q.received++
	q.msgs = append(q.msgs, m)
	q.bytes += size(m)
	for q.len() > 1 && (q.len() > capacity || (maxBytes >= 0 && q.bytes > maxBytes)) {
		q.removeAt(0)
		q.dropped++
		q.unreported++
	}
}

// first returns the index (from the oldest, 0) of the oldest queued
// message filter takes, or -1.
func (q *queue) first(filter Filter) int {
	for i, m := range q.msgs[q.head:] {
		if filter == nil || filter(m) {
			return i
		}
	}
	return -1
}

// at returns the i-th queued message from the oldest.
func (q *queue) at(i int) *Message { return &q.msgs[q.head+i] }

// take removes and returns the i-th queued message, with the drops not
// yet reported.
func (q *queue) take(i int) Message {
	m := q.removeAt(i)
	q.taken++
	m.Dropped, q.unreported = q.unreported, 0
	return m
}

// removeAt removes the i-th queued message from the oldest.
func (q *queue) removeAt(i int) Message {
	j := q.head + i
	m := q.msgs[j]
	q.bytes -= size(m)
	if i == 0 {
		q.msgs[j] = Message{}
		q.head++
	} else {
		copy(q.msgs[j:], q.msgs[j+1:])
		q.msgs[len(q.msgs)-1] = Message{}
		q.msgs = q.msgs[:len(q.msgs)-1]
	}
	switch {
	case q.len() == 0:
		// Empty: start over, keeping the array unless it grew large.
		if cap(q.msgs) > 64 {
			q.msgs = nil
		} else {
			q.msgs = q.msgs[:0]
		}
		q.head = 0
	case q.head > len(q.msgs)/2 && q.head > 16:
		// Mostly taken: move the rest down so the array does not grow
		// without bound.
		n := copy(q.msgs, q.msgs[q.head:])
		clear(q.msgs[n:])
		q.msgs = q.msgs[:n]
		q.head = 0
	}
	return m
}

package stdio

import (
	"bytes"
	"strings"
	"sync"
)

// ring keeps the last capacity bytes written to it. It holds a server's
// stderr so that an error can quote what the server said before it
// failed, without letting a chatty server grow the host's memory. It
// grows as bytes arrive: a quiet server's ring costs nothing.
type ring struct {
	capacity int
	mu       sync.Mutex
	buf      []byte // guarded by mu; len(buf) == capacity once full
	next     int    // guarded by mu; write position once full
	full     bool   // guarded by mu
	total    int64  // guarded by mu; bytes ever written
}

func newRing(capacity int) *ring { return &ring{capacity: capacity} }

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	r.total += int64(n)
	c := r.capacity
	if c <= 0 {
		return n, nil
	}
	if len(p) >= c {
		r.buf = append(r.buf[:0], p[len(p)-c:]...)
		r.next, r.full = 0, true
		return n, nil
	}
	if !r.full {
		room := c - len(r.buf)
		if len(p) < room {
			r.buf = append(r.buf, p...)
			return n, nil
		}
		if cap(r.buf) < c {
			r.buf = append(make([]byte, 0, c), r.buf...)
		}
		r.buf = append(r.buf, p[:room]...)
		p = p[room:]
		r.full, r.next = true, 0
	}
	for len(p) > 0 {
		k := copy(r.buf[r.next:], p)
		p = p[k:]
		r.next = (r.next + k) % c
	}
	return n, nil
}

// Bytes returns the retained bytes, oldest first.
func (r *ring) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return bytes.Clone(r.buf)
	}
	out := make([]byte, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// Tail returns up to maxLines complete-or-final lines of the retained
// text, trimmed, for quoting in an error message.
func (r *ring) Tail(maxLines int) string {
	b := r.Bytes()
	r.mu.Lock()
	dropped := r.full && r.total > int64(len(b))
	r.mu.Unlock()
	s := strings.TrimRight(string(b), "\r\n\t ")
	lines := strings.Split(s, "\n")
	if dropped && len(lines) > 1 {
		lines = lines[1:] // the first line is cut by the ring boundary
	}
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

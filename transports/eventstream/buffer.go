package eventstream

import (
	"io"
	"sync"
)

// Sizes of a Reader's buffers.
const (
	// bufferSize is the buffer a Reader borrows while bytes of its stream
	// are waiting to be parsed. Small: most events are small, and a longer
	// line is assembled across reads.
	bufferSize = 4 << 10
	// firstReadSize is the read that waits, between lines, for the next
	// bytes of an idle stream: it lands in the Reader's own array, so
	// that a stream with nothing to parse holds no buffer.
	firstReadSize = 64
)

// buffers are the borrowed buffers of every Reader (*[]byte of
// bufferSize bytes).
var buffers = sync.Pool{New: func() any { b := make([]byte, bufferSize); return &b }}

// buffer is the Reader's read buffer: like a bufio.Reader of bufferSize
// bytes, except that it gives its array back to the pool when everything
// read has been parsed and the reader waits for a new line. A stream
// waits for its next event in a read of firstReadSize bytes into first;
// the bytes go to a borrowed array and the rest of the event is read
// there. An idle stream (a session's GET stream, most of its life) costs
// first, not bufferSize.
type buffer struct {
	src   io.Reader
	buf   *[]byte // borrowed while it holds unread bytes or a line is under way; nil otherwise
	r, w  int     // the unread bytes are (*buf)[r:w]
	err   error   // sticky: the source's error, reported once the bytes before it are read
	first [firstReadSize]byte
}

// buffered returns the unread bytes, valid until the next fill or
// discard.
func (b *buffer) buffered() []byte {
	if b.buf == nil {
		return nil
	}
	return (*b.buf)[b.r:b.w]
}

// discard drops n unread bytes.
func (b *buffer) discard(n int) {
	b.r += n
	if b.r == b.w {
		b.r, b.w = 0, 0
	}
}

// peek returns the unread bytes once there are at least n (n ≤
// bufferSize), or the unread bytes and the source's error when the stream
// ends first. idle tells a fill that the reader is between lines.
func (b *buffer) peek(n int, idle bool) ([]byte, error) {
	for b.w-b.r < n {
		if b.err != nil {
			if b.r == b.w {
				b.release()
			}
			return b.buffered(), b.err
		}
		b.fill(idle)
	}
	return b.buffered(), nil
}

// fill reads once from the source, retrying reads that return nothing
// (as bufio does, at most 100 times). With nothing unread and idle set,
// the array goes back to the pool first and the read lands in first.
func (b *buffer) fill(idle bool) {
	if b.r == b.w && idle {
		b.release()
	}
	for range 100 {
		var n int
		if b.buf == nil {
			n, b.err = b.src.Read(b.first[:])
			if n > 0 {
				b.buf = buffers.Get().(*[]byte)
				b.r, b.w = 0, copy(*b.buf, b.first[:n])
			}
		} else {
			if b.r > 0 {
				b.w = copy(*b.buf, (*b.buf)[b.r:b.w])
				b.r = 0
			}
			if b.w == len(*b.buf) {
				return // full: the caller parses what is there first
			}
			n, b.err = b.src.Read((*b.buf)[b.w:])
			b.w += n
		}
		if n > 0 || b.err != nil {
			return
		}
	}
	b.err = io.ErrNoProgress
}

// release returns the array to the pool; nothing may be unread.
func (b *buffer) release() {
	if b.buf != nil {
		buffers.Put(b.buf)
		b.buf, b.r, b.w = nil, 0, 0
	}
}

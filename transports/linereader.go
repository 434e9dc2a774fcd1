package transports

import (
	"bufio"
	"bytes"
	"io"
	"sync"
	"syscall"
)

// LineReader reads newline-terminated lines, like bufio.Reader.ReadSlice,
// but holds no buffer while it waits for input that has not arrived: an
// idle connection costs no read buffer. Its buffer is borrowed from a
// pool shared by every LineReader of the same size when bytes arrive,
// and returned when all of them have been consumed and the next read
// would block.
//
// Waiting without a buffer needs a source that can report "no data yet"
// (on Unix, an *os.File pipe or socket: anything with a syscall.RawConn);
// other sources, and every source on Windows, keep the buffer while they
// block in Read.
//
// A LineReader belongs to one goroutine.
type LineReader struct {
	src  io.Reader
	raw  syscall.RawConn // nil: src blocks in Read
	pool bufferPool      // of *[]byte, all of len size
	buf  *[]byte         // nil while idle
	r, w int             // unread bytes are (*buf)[r:w]
	err  error           // sticky error from src
}

// bufferPool lends a LineReader its buffer: the *sync.Pool shared by every
// LineReader of one size (linePool).
type bufferPool interface {
	Get() any
	Put(any)
}

var (
	linePoolsMu sync.Mutex
	linePools   = map[int]*sync.Pool{} // by buffer size; guarded by linePoolsMu
)

func linePool(size int) *sync.Pool {
	linePoolsMu.Lock()
	defer linePoolsMu.Unlock()
	p := linePools[size]
	if p == nil {
		p = &sync.Pool{New: func() any { b := make([]byte, size); return &b }}
		linePools[size] = p
	}
	return p
}

// NewLineReader returns a LineReader of src whose buffer holds size
// bytes: ReadSlice returns bufio.ErrBufferFull for longer lines.
func NewLineReader(src io.Reader, size int) *LineReader {
	return &LineReader{src: src, pool: linePool(size), raw: pollable(src)}
}

// ReadSlice returns the bytes up to and including the next newline. The
// slice is valid until the next call. A line longer than the buffer is
// returned in buffer-sized pieces with bufio.ErrBufferFull; at the end of
// the input the remaining bytes are returned with the source's error
// (io.EOF at a clean end).
func (lr *LineReader) ReadSlice() ([]byte, error) {
	for {
		if lr.buf != nil {
			if i := bytes.IndexByte((*lr.buf)[lr.r:lr.w], '\n'); i >= 0 {
				line := (*lr.buf)[lr.r : lr.r+i+1]
				lr.r += i + 1
				return line, nil
			}
			if lr.err != nil {
				line := (*lr.buf)[lr.r:lr.w]
				lr.r = lr.w
				return line, lr.err
			}
			if lr.r == 0 && lr.w == len(*lr.buf) {
				line := *lr.buf
				lr.r = lr.w
				return line, bufio.ErrBufferFull
			}
		} else if lr.err != nil {
			return nil, lr.err
		}
		lr.fill()
	}
}

// fill reads once into the free end of the buffer, borrowing one if
// needed, and sets lr.err when the source fails.
func (lr *LineReader) fill() {
	if lr.buf != nil && lr.r > 0 {
		lr.w = copy(*lr.buf, (*lr.buf)[lr.r:lr.w])
		lr.r = 0
	}
	if lr.raw == nil {
		lr.fillBlocking()
		return
	}
	lr.fillRaw()
}

// fillBlocking reads once from src into the buffer, which it holds while
// src blocks.
func (lr *LineReader) fillBlocking() {
	lr.borrow()
	n, err := lr.src.Read((*lr.buf)[lr.w:])
	lr.w += n
	lr.err = err
}

// borrow takes a buffer from the pool if none is held.
func (lr *LineReader) borrow() {
	if lr.buf == nil {
		lr.buf = lr.pool.Get().(*[]byte)
		lr.r, lr.w = 0, 0
	}
}

// release returns the buffer to the pool if it holds no unread bytes.
func (lr *LineReader) release() {
	if lr.buf != nil && lr.r == lr.w {
		lr.pool.Put(lr.buf)
		lr.buf = nil
		lr.r, lr.w = 0, 0
	}
}

// Close returns the buffer to the pool; the LineReader must not be used
// after it.
func (lr *LineReader) Close() {
	if lr.buf != nil {
		lr.pool.Put(lr.buf)
		lr.buf = nil
	}
}

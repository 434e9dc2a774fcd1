package testwait

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// LineReader reads the lines of a stream (a process's output, an HTTP
// body) with a deadline on each: a goroutine reads ahead and Line waits
// for it.
//
// Concurrency: Line and Event are called from the test's goroutine only;
// the reading goroutine is the LineReader's own and ends when the stream
// does (NewLineReader closes a stream that is an io.Closer when the test
// ends, which ends it).
type LineReader struct {
	t     testing.TB
	r     io.Reader
	lines chan line
	err   error // the stream's end, once Line has seen it
}

type line struct {
	raw string // as read, line ending included
	err error
}

// NewLineReader starts reading r line by line. When r is an io.Closer, it
// is closed when the test ends (and the reading goroutine with it).
func NewLineReader(t testing.TB, r io.Reader) *LineReader {
	t.Helper()
	lr := &LineReader{t: t, r: r, lines: make(chan line, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lr.lines)
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			s, err := br.ReadString('\n')
			if s != "" || err != nil {
				lr.lines <- line{raw: s, err: err}
			}
			if err != nil {
				return
			}
		}
	}()
	if c, ok := r.(io.Closer); ok {
		t.Cleanup(func() {
			_ = c.Close()
			// Drain so that the goroutine is not stuck on a full channel.
			for {
				select {
				case _, ok := <-lr.lines:
					if !ok {
						return
					}
				case <-time.After(Patience):
					t.Errorf("testwait: the line reader did not end within %v of closing its stream", Patience)
					return
				}
			}
		})
	}
	return lr
}

// Line returns the next line without its line ending. At the end of the
// stream it returns the stream's error (io.EOF for a clean end), with the
// last unterminated line if there was one. It fails the test when no line
// comes within Patience; what names what the line was awaited for.
func (lr *LineReader) Line(what string) (string, error) {
	lr.t.Helper()
	return lr.LineWithin(Patience, what)
}

// LineWithin is Line with its own deadline d.
func (lr *LineReader) LineWithin(d time.Duration, what string) (string, error) {
	lr.t.Helper()
	s, err, ok := lr.lineBefore(time.Now().Add(d))
	if !ok {
		lr.t.Fatalf("testwait: waited %v for a line: %s", d, what)
	}
	return s, err
}

// lineBefore returns the next line, or ok false when none came before
// deadline.
func (lr *LineReader) lineBefore(deadline time.Time) (s string, err error, ok bool) {
	if lr.err != nil {
		return "", lr.err, true
	}
	select {
	case l, open := <-lr.lines: // a line already read wins over a spent deadline
		s, err = lr.take(l, open)
		return s, err, true
	default:
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case l, open := <-lr.lines:
		s, err = lr.take(l, open)
		return s, err, true
	case <-timer.C:
		return "", nil, false
	}
}

func (lr *LineReader) take(l line, ok bool) (string, error) {
	s, err := lr.takeRaw(l, ok)
	return strings.TrimRight(s, "\r\n"), err
}

func (lr *LineReader) takeRaw(l line, ok bool) (string, error) {
	if !ok {
		return "", lr.err
	}
	if l.err != nil {
		lr.err = l.err
	}
	return l.raw, l.err
}

// Rest returns everything the stream still holds, as written (line
// endings included), once it has ended: a nil error for a clean end
// (io.EOF), else the stream's error. It fails the test when the stream
// has not ended within Patience.
func (lr *LineReader) Rest(what string) (string, error) {
	lr.t.Helper()
	deadline := time.Now().Add(Patience)
	var b strings.Builder
	for lr.err == nil {
		timer := time.NewTimer(time.Until(deadline))
		select {
		case l, open := <-lr.lines:
			s, _ := lr.takeRaw(l, open)
			b.WriteString(s)
		case <-timer.C:
			lr.t.Fatalf("testwait: waited %v for the end of the stream: %s", Patience, what)
		}
		timer.Stop()
	}
	if errors.Is(lr.err, io.EOF) {
		return b.String(), nil
	}
	return b.String(), lr.err
}

// MustLine is Line that also fails the test when the stream ends first.
func (lr *LineReader) MustLine(what string) string {
	lr.t.Helper()
	s, err := lr.Line(what)
	if err != nil {
		lr.t.Fatalf("testwait: the stream ended (%v) while waiting for a line: %s", err, what)
	}
	return s
}

// Close closes the stream when it is an io.Closer (an HTTP body: the
// client hangs up), which ends the reading goroutine.
func (lr *LineReader) Close() {
	if c, ok := lr.r.(io.Closer); ok {
		_ = c.Close()
	}
}

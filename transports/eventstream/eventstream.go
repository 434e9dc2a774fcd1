// Package eventstream reads and writes server-sent events (the
// text/event-stream format of the WHATWG HTML standard, §9.2), as
// Streamable HTTP and the legacy HTTP+SSE transport carry them.
//
// The reader accepts every line ending (CRLF, LF, CR), comments, multi-line
// data, and the id and retry fields; it caps the size of one event so that
// a server cannot take the host's memory with an endless line.
package eventstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/mcpvisor/mcpvisor/transports"
)

// Event is one dispatched server-sent event.
type Event struct {
	// Type is the event field; empty means "message".
	Type string
	// Data is the event's data lines joined with "\n". It is valid until
	// the next call to Reader.Next.
	Data []byte
	// ID is the stream's last event id after this event (the id field of
	// this event, or of an earlier one).
	ID string
}

// Reader parses an event stream. It is not safe for concurrent use.
type Reader struct {
	br  *bufio.Reader
	max int

	line   []byte // the current line, when it spans buffer refills
	skipLF bool   // the last line ended with CR: an LF right after it belongs to that ending
	bom    bool   // the leading byte-order mark has been checked

	data      []byte
	eventType string
	hasData   bool
	oversize  bool  // the current event exceeded max; it is being skipped
	size      int64 // bytes of the current oversize event seen so far
	prefix    []byte

	lastID   string
	retry    time.Duration
	hasRetry bool
}

// DefaultMaxEventSize is the event size cap when NewReader is given zero.
const DefaultMaxEventSize = transports.DefaultMaxFrameSize

// prefixSize is how much of an oversize event is kept for its error.
const prefixSize = 4 << 10

// NewReader returns a reader of r that refuses events (and lines) over
// maxEventSize bytes; zero means DefaultMaxEventSize.
func NewReader(r io.Reader, maxEventSize int) *Reader {
	if maxEventSize <= 0 {
		maxEventSize = DefaultMaxEventSize
	}
	return &Reader{br: bufio.NewReaderSize(r, 32<<10), max: maxEventSize}
}

// LastID returns the last event id the stream set (for Last-Event-ID).
func (r *Reader) LastID() string { return r.lastID }

// Retry returns the reconnection time the stream set with a retry field,
// and whether it set one.
func (r *Reader) Retry() (time.Duration, bool) { return r.retry, r.hasRetry }

// Resume carries a stream's state over to the reader of the stream that
// resumes it (a GET with Last-Event-ID): the last event id, and the retry
// delay if the old stream set one.
func (r *Reader) Resume(lastID string, retry time.Duration, hasRetry bool) {
	r.lastID = lastID
	if hasRetry {
		r.retry, r.hasRetry = retry, true
	}
}

// Next returns the next event that carries data. Events without data
// (priming events that only set an id or retry) update LastID and Retry
// and are not returned. At the end of the stream Next returns io.EOF; an
// event cut off by the end is discarded, as the standard says. An event
// over the size cap is skipped and reported as a
// *transports.FrameTooLargeError, after which Next may be called again.
func (r *Reader) Next() (Event, error) {
	for {
		line, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return Event{}, io.EOF
			}
			return Event{}, err
		}
		if line == nil { // a line over the cap: the event is oversize
			r.markOversize(0)
			continue
		}
		if len(line) == 0 {
			if ev, ok, err := r.dispatch(); ok || err != nil {
				return ev, err
			}
			continue
		}
		r.field(line)
	}
}

// dispatch ends the current event at a blank line.
func (r *Reader) dispatch() (Event, bool, error) {
	defer func() {
		r.data = r.data[:0]
		r.eventType = ""
		r.hasData = false
		r.oversize = false
		r.size = 0
		r.prefix = nil
	}()
	if r.oversize {
		return Event{}, false, &transports.FrameTooLargeError{Size: r.size, Limit: int64(r.max), Prefix: r.prefix}
	}
	if !r.hasData {
		return Event{}, false, nil
	}
	return Event{Type: r.eventType, Data: r.data, ID: r.lastID}, true, nil
}

// field applies one non-empty line.
func (r *Reader) field(line []byte) {
	if line[0] == ':' {
		return // a comment
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		if r.oversize {
			r.markOversize(len(value) + 1)
			return
		}
		if r.hasData {
			r.data = append(r.data, '\n')
		}
		r.hasData = true
		if len(r.data)+len(value) > r.max {
			r.keepPrefix(r.data)
			r.keepPrefix(value)
			r.markOversize(len(r.data) + len(value))
			return
		}
		r.data = append(r.data, value...)
	case "event":
		r.eventType = string(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.lastID = string(value)
		}
	case "retry":
		if n, err := strconv.ParseUint(string(value), 10, 32); err == nil && len(value) > 0 && value[0] != '+' {
			r.retry = time.Duration(n) * time.Millisecond
			r.hasRetry = true
		}
	}
}

func (r *Reader) keepPrefix(b []byte) {
	if room := prefixSize - len(r.prefix); room > 0 {
		r.prefix = append(r.prefix, b[:min(room, len(b))]...)
	}
}

func (r *Reader) markOversize(n int) {
	if !r.oversize {
		r.oversize = true
		r.size = int64(r.max) + 1
		r.data = r.data[:0]
	}
	r.size += int64(n)
}

// readLine returns the next line without its ending. It returns a nil
// slice (and no error) for a line over the cap, which it skips; the
// returned slice is valid until the next call.
func (r *Reader) readLine() ([]byte, error) {
	if !r.bom {
		r.bom = true
		if b, err := r.br.Peek(3); err == nil && string(b) == "\ufeff" {
			r.br.Discard(3)
		}
	}
	r.line = r.line[:0]
	tooLong := false
	for {
		buf, err := r.br.Peek(1)
		if err != nil {
			return nil, err // a partial line at the end is discarded
		}
		buf, _ = r.br.Peek(r.br.Buffered())
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				r.br.Discard(1)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			if !tooLong {
				r.line = append(r.line, buf...)
				if len(r.line) > r.max {
					r.keepPrefixFromLine()
					tooLong = true
				}
			}
			r.br.Discard(len(buf))
			continue
		}
		if !tooLong {
			r.line = append(r.line, buf[:i]...)
			if len(r.line) > r.max {
				r.keepPrefixFromLine()
				tooLong = true
			}
		}
		r.skipLF = buf[i] == '\r'
		r.br.Discard(i + 1)
		if tooLong {
			r.line = r.line[:0]
			return nil, nil
		}
		if r.line == nil {
			r.line = []byte{}
		}
		return r.line, nil
	}
}

// keepPrefixFromLine saves the start of an over-long data line for the
// error and drops the rest of the buffered line.
func (r *Reader) keepPrefixFromLine() {
	if len(r.prefix) == 0 {
		if v, ok := bytes.CutPrefix(r.line, []byte("data:")); ok {
			r.keepPrefix(bytes.TrimPrefix(v, []byte(" ")))
		}
	}
	r.line = r.line[:0]
}

// Write writes one event: an optional id, type and retry, then data split
// into lines. Data must not contain CR; an empty data writes an event
// with one empty data line.
func Write(w io.Writer, ev Event, retry time.Duration) error {
	var b []byte
	if ev.ID != "" {
		b = append(append(append(b, "id: "...), ev.ID...), '\n')
	}
	if ev.Type != "" {
		b = append(append(append(b, "event: "...), ev.Type...), '\n')
	}
	if retry > 0 {
		b = strconv.AppendInt(append(b, "retry: "...), retry.Milliseconds(), 10)
		b = append(b, '\n')
	}
	data := ev.Data
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		b = append(append(append(b, "data: "...), data[:i]...), '\n')
		data = data[i+1:]
	}
	b = append(append(append(b, "data: "...), data...), "\n\n"...)
	_, err := w.Write(b)
	return err
}

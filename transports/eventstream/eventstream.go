// Package eventstream reads and writes server-sent events (the
// text/event-stream format of the WHATWG HTML standard, §9.2), as
// Streamable HTTP and the legacy HTTP+SSE transport carry them.
//
// The reader accepts every line ending (CRLF, LF, CR), comments, multi-line
// data, and the id and retry fields; it caps the size of one event so that
// a server cannot take the host's memory with an endless line.
package eventstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
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

// Reader parses an event stream. It is not safe for concurrent use: all
// its state belongs to the goroutine calling Next.
type Reader struct {
	in      buffer
	max     int // the cap on one event's data
	lineMax int // the cap on one line: a data line of max bytes of value

	line   []byte // the current line, when it spans buffer refills
	skipLF bool   // the last line ended with CR: an LF right after it belongs to that ending
	bom    bool   // the leading byte-order mark has been checked

	// The event being assembled; reset by dispatch.
	data      []byte
	eventType string
	hasData   bool
	oversize  bool   // the current event exceeded max; its data is being skipped
	size      int64  // bytes of data of the current oversize event seen so far
	prefix    []byte // the first bytes of the current oversize event's data

	idBuf    string // the last id field seen; it becomes lastID when an event is dispatched
	lastID   string
	retry    time.Duration
	hasRetry bool
}

// DefaultMaxEventSize is the event size cap when NewReader is given zero.
const DefaultMaxEventSize = transports.DefaultMaxFrameSize

const (
	// prefixSize is how much of an oversize event is kept for its error.
	prefixSize = 4 << 10
	// dataField starts the line of a data field as Write writes it.
	dataField = "data: "
	// retainedBufferLimit: line and data buffers that grew beyond this
	// for one big event are not kept for the next.
	retainedBufferLimit = 1 << 20
)

// NewReader returns a reader of r that refuses events over maxEventSize
// bytes of data (and lines too long to carry at most that much); zero
// means DefaultMaxEventSize.
func NewReader(r io.Reader, maxEventSize int) *Reader {
	if maxEventSize <= 0 {
		maxEventSize = DefaultMaxEventSize
	}
	return &Reader{
		in:      buffer{src: r},
		max:     maxEventSize,
		lineMax: maxEventSize + len(dataField),
	}
}

// LastID returns the last event id the stream set (for Last-Event-ID). As
// the standard says, an id field takes effect when its event is
// dispatched: the id of an event cut off by the end of the stream is not
// reported, so that resuming from LastID replays that event.
func (r *Reader) LastID() string { return r.lastID }

// Retry returns the reconnection time the stream set with a retry field,
// and whether it set one.
func (r *Reader) Retry() (time.Duration, bool) { return r.retry, r.hasRetry }

// Resume carries a stream's state over to the reader of the stream that
// resumes it (a GET with Last-Event-ID): the last event id, and the retry
// delay if the old stream set one.
func (r *Reader) Resume(lastID string, retry time.Duration, hasRetry bool) {
	r.lastID, r.idBuf = lastID, lastID
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
// A line over the cap that is not a data line (a huge comment) is
// skipped silently.
func (r *Reader) Next() (Event, error) {
	for {
		line, skipped, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return Event{}, io.EOF
			}
			return Event{}, err
		}
		if skipped > 0 {
			r.longLine(line, skipped)
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
		if cap(r.data) > retainedBufferLimit {
			r.data = nil // the returned event keeps the old array
		}
		r.data = r.data[:0]
		r.eventType = ""
		r.hasData = false
		r.oversize = false
		r.size = 0
		r.prefix = nil
	}()
	r.lastID = r.idBuf
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
	name, value := fieldOf(line)
	switch string(name) {
	case "data":
		r.appendData(value, int64(len(value)))
	case "event":
		r.eventType = string(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.idBuf = string(value)
		}
	case "retry":
		// Digits only: ParseUint refuses signs, and base 10 refuses "_".
		if n, err := strconv.ParseUint(string(value), 10, 32); err == nil {
			r.retry = time.Duration(n) * time.Millisecond
			r.hasRetry = true
		}
	}
}

// fieldOf splits a line into its field name and value, dropping one
// space after the colon.
func fieldOf(line []byte) (name, value []byte) {
	i := bytes.IndexByte(line, ':')
	if i < 0 {
		return line, nil
	}
	name, value = line[:i], line[i+1:]
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	return name, value
}

// appendData adds a data line's value to the event. value may be only the
// start of the value when the line was too long; n is its full length.
func (r *Reader) appendData(value []byte, n int64) {
	var sep int64
	if r.hasData {
		sep = 1
	}
	r.hasData = true
	switch {
	case r.oversize:
		if sep > 0 {
			r.keepPrefix([]byte{'\n'})
		}
		r.keepPrefix(value)
		r.size += sep + n
	case int64(len(r.data))+sep+n > int64(r.max):
		r.oversize = true
		r.keepPrefix(r.data)
		if sep > 0 {
			r.keepPrefix([]byte{'\n'})
		}
		r.keepPrefix(value)
		r.size = int64(len(r.data)) + sep + n
		r.data = r.data[:0]
	default:
		if sep > 0 {
			r.data = append(r.data, '\n')
		}
		r.data = append(r.data, value...)
	}
}

// longLine handles a line over the cap, of which head is the start and
// n the length. Only a data line matters: it makes its event oversize.
func (r *Reader) longLine(head []byte, n int64) {
	if head[0] == ':' {
		return
	}
	name, value := fieldOf(head)
	if string(name) != "data" {
		return
	}
	r.appendData(value, n-int64(len(head)-len(value)))
}

func (r *Reader) keepPrefix(b []byte) {
	if room := prefixSize - len(r.prefix); room > 0 {
		r.prefix = append(r.prefix, b[:min(room, len(b))]...)
	}
}

// readLine returns the next line without its ending; the slice is valid
// until the next call. A line longer than the line cap is skipped: then
// readLine returns its first bytes (enough for a field name and an
// error's prefix) and its full length as skipped. A partial line at the
// end of the stream is discarded.
func (r *Reader) readLine() (line []byte, skipped int64, err error) {
	if !r.bom {
		r.bom = true
		if b, err := r.in.peek(3, true); err == nil && string(b[:3]) == "\ufeff" {
			r.in.discard(3)
		}
	}
	if cap(r.line) > retainedBufferLimit {
		r.line = nil
	}
	r.line = r.line[:0]
	headMax := len(dataField) + prefixSize // what is kept of a long line
	var long int64                         // >0: the line is over the cap; its length so far
	for {
		// Between lines (nothing of the next one read yet) the buffer
		// may go back to the pool while the stream is quiet.
		buf, err := r.in.peek(1, len(r.line) == 0 && long == 0)
		if len(buf) == 0 {
			return nil, 0, err
		}
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				r.in.discard(1)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		chunk := buf
		if i >= 0 {
			chunk = buf[:i]
		}
		switch {
		case long > 0:
			long += int64(len(chunk))
			if room := headMax - len(r.line); room > 0 {
				r.line = append(r.line, chunk[:min(room, len(chunk))]...)
			}
		case len(r.line)+len(chunk) > r.lineMax:
			long = int64(len(r.line) + len(chunk))
			if room := headMax - len(r.line); room > 0 {
				r.line = append(r.line, chunk[:min(room, len(chunk))]...)
			} else {
				r.line = r.line[:headMax]
			}
		default:
			r.line = append(r.line, chunk...)
		}
		if i < 0 {
			r.in.discard(len(buf))
			continue
		}
		r.skipLF = buf[i] == '\r'
		r.in.discard(i + 1)
		return r.line, long, nil
	}
}

// Write writes one event: an optional id, type and retry, then data split
// into lines. An empty data writes an event with one empty data line.
// Write refuses, writing nothing, what a reader could not give back
// unchanged: a line break (CR or LF) in the id or type, a NUL in the id,
// or a CR in the data.
func Write(w io.Writer, ev Event, retry time.Duration) error {
	switch {
	case strings.ContainsAny(ev.ID, "\r\n\x00"):
		return fmt.Errorf("eventstream: event id %q holds a line break or NUL", ev.ID)
	case strings.ContainsAny(ev.Type, "\r\n"):
		return fmt.Errorf("eventstream: event type %q holds a line break", ev.Type)
	case bytes.IndexByte(ev.Data, '\r') >= 0:
		return errors.New("eventstream: event data holds a CR")
	}
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
		b = append(append(append(b, dataField...), data[:i]...), '\n')
		data = data[i+1:]
	}
	b = append(append(append(b, dataField...), data...), "\n\n"...)
	_, err := w.Write(b)
	return err
}

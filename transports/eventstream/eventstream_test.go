package eventstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpvisor/mcpvisor/transports"
)

// got is one result of Reader.Next, flattened for comparison: an event,
// or an oversize event's error.
type got struct {
	Type, Data, ID string
	TooLarge       bool  // a *transports.FrameTooLargeError was returned
	Size           int64 // its Size
	Prefix         string
}

func ev(data string) got          { return got{Data: data} }
func evID(data, id string) got    { return got{Data: data, ID: id} }
func evType(typ, data string) got { return got{Type: typ, Data: data} }
func tooLarge(size int64, prefix string) got {
	return got{TooLarge: true, Size: size, Prefix: prefix}
}

// readAll reads r to its end and returns what Next gave.
func readAll(t testing.TB, r *Reader) ([]got, error) {
	t.Helper()
	var out []got
	for {
		e, err := r.Next()
		var tl *transports.FrameTooLargeError
		switch {
		case err == nil:
			out = append(out, got{Type: e.Type, Data: string(e.Data), ID: e.ID})
		case errors.As(err, &tl):
			out = append(out, got{TooLarge: true, Size: tl.Size, Prefix: string(tl.Prefix)})
		case err == io.EOF:
			return out, nil
		default:
			return out, err
		}
	}
}

// readers are the ways a stream arrives: whole, one byte per read (so
// that every line ending straddles a read boundary), and in halves.
var readers = []struct {
	name string
	wrap func(io.Reader) io.Reader
}{
	{"whole", func(r io.Reader) io.Reader { return r }},
	{"one-byte", iotest.OneByteReader},
	{"half", iotest.HalfReader},
}

func TestReaderParsesTheEventStreamFormat(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int // 0: the default cap
		want []got
	}{
		{"LF endings", "data: a\n\ndata: b\n\n", 0, []got{ev("a"), ev("b")}},
		{"CRLF endings", "data: a\r\n\r\ndata: b\r\n\r\n", 0, []got{ev("a"), ev("b")}},
		{"CR endings", "data: a\r\rdata: b\r\r", 0, []got{ev("a"), ev("b")}},
		{"mixed endings", "data: a\r\ndata: b\rdata: c\n\r\n", 0, []got{ev("a\nb\nc")}},
		{"CRLF is one ending, not a line and a blank line", "data: a\r\ndata: b\r\n\r\n", 0, []got{ev("a\nb")}},
		{"CR CR is a line and a blank line", "data: a\r\rdata: b\r\r", 0, []got{ev("a"), ev("b")}},
		{"LF CR is two endings", "data: a\n\rdata: b\n\n", 0, []got{ev("a"), ev("b")}},
		{"comments are ignored", ": hello\ndata: a\n:\n: bye\n\n", 0, []got{ev("a")}},
		{"a comment alone dispatches nothing", ": keep-alive\n\n", 0, nil},
		{"multi-line data joins with LF", "data: a\ndata:\ndata: b\n\n", 0, []got{ev("a\n\nb")}},
		{"data without a colon is an empty line of data", "data\n\n", 0, []got{ev("")}},
		{"two bare data lines", "data\ndata\n\n", 0, []got{ev("\n")}},
		{"no space after the colon", "data:a\n\n", 0, []got{ev("a")}},
		{"only one leading space is stripped", "data:  a \n\n", 0, []got{ev(" a ")}},
		{"a tab is not stripped", "data:\ta\n\n", 0, []got{ev("\ta")}},
		{"a colon in the value is kept", "data: {\"a\":1}\n\n", 0, []got{ev(`{"a":1}`)}},
		{"a space before the colon makes another field", "data : a\ndata: b\n\n", 0, []got{ev("b")}},
		{"unknown fields are ignored", "foo: bar\ndata: a\nDATA: x\n\n", 0, []got{ev("a")}},
		{"event type", "event: endpoint\ndata: /m\n\n", 0, []got{evType("endpoint", "/m")}},
		{"the type is reset after each event", "event: x\ndata: a\n\ndata: b\n\n", 0, []got{evType("x", "a"), ev("b")}},
		{"the last type field wins", "event: x\nevent: y\ndata: a\n\n", 0, []got{evType("y", "a")}},
		{"id", "id: 7\ndata: a\n\n", 0, []got{evID("a", "7")}},
		{"the id carries over to later events", "id: 7\ndata: a\n\ndata: b\n\n", 0, []got{evID("a", "7"), evID("b", "7")}},
		{"an empty id resets it", "id: 7\ndata: a\n\nid\ndata: b\n\n", 0, []got{evID("a", "7"), ev("b")}},
		{"an id with NUL is ignored", "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", 0, []got{evID("a", "1"), evID("b", "1")}},
		{"an event without data updates the id", "id: 5\n\ndata: a\n\n", 0, []got{evID("a", "5")}},
		{"an event with only a type is not returned", "event: x\n\ndata: a\n\n", 0, []got{ev("a")}},
		{"a leading BOM is skipped", "\ufeffdata: a\n\n", 0, []got{ev("a")}},
		{"only one BOM is skipped", "\ufeff\ufeffdata: a\n\ndata: b\n\n", 0, []got{ev("b")}},
		{"a BOM later is data", "data: \ufeffa\n\n", 0, []got{ev("\ufeffa")}},
		{"EOF mid-event discards it", "data: a\n\ndata: b\n", 0, []got{ev("a")}},
		{"EOF mid-line discards it", "data: a\n\ndata: b", 0, []got{ev("a")}},
		{"EOF right after a CR", "data: a\r\rdata: b\r", 0, []got{ev("a")}},
		{"an empty stream", "", 0, nil},
		{"blank lines only", "\n\r\n\r\n\n", 0, nil},
		{"an event at the cap", "data: 12345678\n\n", 8, []got{ev("12345678")}},
		{"a line at the cap with no space", "data:12345678\n\n", 8, []got{ev("12345678")}},
		{"an oversize event, then the next one", "data: 123456789\n\ndata: ok\n\n", 8,
			[]got{tooLarge(9, "123456789"), ev("ok")}},
		{"an event over the cap in several lines", "data: 1234\ndata: 5678\n\ndata: ok\n\n", 8,
			[]got{tooLarge(9, "1234\n5678"), ev("ok")}},
		{"lines after the overflow count in the size", "data: 12345678\ndata: 9\ndata: abc\n\n", 8,
			[]got{tooLarge(14, "12345678\n9\nabc")}},
		{"an over-long single line", "data: " + strings.Repeat("x", 100) + "\n\ndata: ok\n\n", 8,
			[]got{tooLarge(100, strings.Repeat("x", 100)), ev("ok")}},
		{"an over-long line after data", "data: ab\ndata: " + strings.Repeat("x", 20) + "\r\n\r\ndata: ok\n\n", 8,
			[]got{tooLarge(23, "ab\n"+strings.Repeat("x", 20)), ev("ok")}},
		{"an over-long comment is skipped", ": " + strings.Repeat("x", 100) + "\ndata: ok\n\n", 8, []got{ev("ok")}},
		{"an over-long unknown field is skipped", "junk" + strings.Repeat("x", 100) + "\ndata: ok\n\n", 8, []got{ev("ok")}},
		{"an oversize event keeps its id", "id: 3\ndata: 123456789\n\ndata: ok\n\n", 8,
			[]got{tooLarge(9, "123456789"), evID("ok", "3")}},
		{"an oversize event's type does not leak", "event: x\ndata: 123456789\n\ndata: ok\n\n", 8,
			[]got{tooLarge(9, "123456789"), ev("ok")}},
		{"EOF in an over-long line", "data: ok\n\ndata: " + strings.Repeat("x", 100), 8, []got{ev("ok")}},
	}
	for _, tt := range tests {
		for _, rd := range readers {
			t.Run(tt.name+"/"+rd.name, func(t *testing.T) {
				r := NewReader(rd.wrap(strings.NewReader(tt.in)), tt.max)
				out, err := readAll(t, r)
				require.NoError(t, err)
				assert.Equal(t, tt.want, out)
			})
		}
	}
}

func TestThePrefixOfAnOversizeEventIsItsFirst4KiB(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 1024) // 16 KiB
	tests := []struct{ in, data string }{
		{"data: " + big + "\n\n", big},                                             // one long line
		{"data: " + big[:40] + "\ndata: " + big + "\n\n", big[:40] + "\n" + big},   // a line within the cap, then a long one
		{"data: " + big[:100] + "\ndata: " + big + "\n\n", big[:100] + "\n" + big}, // two long lines
	}
	for i, tt := range tests {
		for _, rd := range readers {
			r := NewReader(rd.wrap(strings.NewReader(tt.in)), 50)
			_, err := r.Next()
			var tl *transports.FrameTooLargeError
			require.ErrorAs(t, err, &tl, "%d %s", i, rd.name)
			assert.Equal(t, tt.data[:4096], string(tl.Prefix), "%d %s", i, rd.name)
			assert.EqualValues(t, len(tt.data), tl.Size, "%d %s", i, rd.name)
			assert.EqualValues(t, 50, tl.Limit)
		}
	}
}

func TestLastIDIsCommittedWhenAnEventIsDispatched(t *testing.T) {
	for _, rd := range readers {
		// The second event is cut off by the end of the stream: resuming
		// from LastID must replay it, so its id must not count.
		r := NewReader(rd.wrap(strings.NewReader("id: 1\ndata: a\n\nid: 2\ndata: b\n")), 0)
		out, err := readAll(t, r)
		require.NoError(t, err)
		assert.Equal(t, []got{evID("a", "1")}, out)
		assert.Equal(t, "1", r.LastID(), rd.name)

		r = NewReader(rd.wrap(strings.NewReader("id: 9\n\n")), 0)
		out, err = readAll(t, r)
		require.NoError(t, err)
		assert.Empty(t, out, "an event without data is not returned")
		assert.Equal(t, "9", r.LastID(), "but its id counts")
	}
}

func TestResumeCarriesTheLastIDAndRetry(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\nid: 8\ndata: b\n\n"), 0)
	r.Resume("7", 3*time.Second, true)
	out, err := readAll(t, r)
	require.NoError(t, err)
	assert.Equal(t, []got{evID("a", "7"), evID("b", "8")}, out)
	d, ok := r.Retry()
	assert.True(t, ok)
	assert.Equal(t, 3*time.Second, d)

	r = NewReader(strings.NewReader("retry: 10\n\n"), 0)
	r.Resume("", 0, false)
	_, err = readAll(t, r)
	require.NoError(t, err)
	d, ok = r.Retry()
	assert.True(t, ok, "the stream's own retry stands")
	assert.Equal(t, 10*time.Millisecond, d)
}

func TestRetryTakesDigitsOnly(t *testing.T) {
	tests := []struct {
		line string
		set  bool
		want time.Duration
	}{
		{"retry: 1500", true, 1500 * time.Millisecond},
		{"retry:0", true, 0},
		{"retry: 15x", false, 0},
		{"retry: -1", false, 0},
		{"retry: +5", false, 0},
		{"retry: 1.5", false, 0},
		{"retry: 1_000", false, 0},
		{"retry:  5", false, 0}, // the second space is part of the value
		{"retry:", false, 0},
		{"retry", false, 0},
		{"retry: 99999999999999", false, 0}, // out of range
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.line+"\n\n"), 0)
			_, err := readAll(t, r)
			require.NoError(t, err)
			d, ok := r.Retry()
			assert.Equal(t, tt.set, ok)
			assert.Equal(t, tt.want, d)
		})
	}
}

// errAfter returns its data, then err.
type errAfter struct {
	r   io.Reader
	err error
}

func (e *errAfter) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		err = e.err
	}
	return n, err
}

func TestReadErrorsOtherThanEOFAreReturned(t *testing.T) {
	r := NewReader(&errAfter{strings.NewReader("data: a\n\ndata: b"), io.ErrUnexpectedEOF}, 0)
	e, err := r.Next()
	require.NoError(t, err)
	assert.Equal(t, "a", string(e.Data))
	_, err = r.Next()
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func TestWriteRoundTrips(t *testing.T) {
	events := []Event{
		{Data: []byte("{}")},
		{Data: []byte("")},
		{Data: []byte("\n")},
		{Data: []byte("a\nb\n\nc")},
		{Data: []byte(" leading and trailing spaces ")},
		{Data: []byte(": not a comment")},
		{Type: "endpoint", Data: []byte("/messages?sessionId=1")},
		{Type: " spaced", ID: " 42", Data: []byte("x")},
		{ID: "abc", Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)},
		{Type: "message", ID: "1", Data: []byte("\ufeff")},
	}
	for i, e := range events {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, Write(&buf, e, 2500*time.Millisecond))
			r := NewReader(&buf, 0)
			back, err := r.Next()
			require.NoError(t, err)
			assert.Equal(t, string(e.Data), string(back.Data))
			assert.Equal(t, e.Type, back.Type)
			assert.Equal(t, e.ID, back.ID)
			d, ok := r.Retry()
			assert.True(t, ok)
			assert.Equal(t, 2500*time.Millisecond, d)
			_, err = r.Next()
			assert.Equal(t, io.EOF, err)
		})
	}
}

func TestWriteFormat(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, Event{ID: "1", Type: "message", Data: []byte("a\nb")}, 0))
	assert.Equal(t, "id: 1\nevent: message\ndata: a\ndata: b\n\n", buf.String())
}

func TestWriteRefusesWhatCannotRoundTrip(t *testing.T) {
	for _, e := range []Event{
		{ID: "a\nb", Data: []byte("x")},
		{ID: "a\rb", Data: []byte("x")},
		{ID: "a\x00b", Data: []byte("x")},
		{Type: "a\nb", Data: []byte("x")},
		{Type: "a\r", Data: []byte("x")},
		{Data: []byte("a\r\nb")},
	} {
		var buf bytes.Buffer
		assert.Error(t, Write(&buf, e, 0), "%+v", e)
		assert.Zero(t, buf.Len(), "nothing is written")
	}
}

func FuzzReader(f *testing.F) {
	seeds := []string{
		"data: a\n\n",
		"data: a\r\n\r\n",
		"data: a\r\rdata: b\r\r",
		"\ufeffdata: x\n\n",
		": c\nid: 1\nevent: e\nretry: 5\ndata: a\ndata\n\n",
		"id: 1\x002\ndata: a\n\n",
		"data: " + strings.Repeat("x", 40) + "\n\ndata: ok\n\n",
		"data: 1234\ndata: 5678\ndata: 9\n\n",
		"data:  two spaces\n\n\n\n",
		"event: endpoint\ndata: /messages?session=1\n\n",
		"data: a\r",
		": " + strings.Repeat("c", 40) + "\r\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s), uint8(16))
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, in []byte, capByte uint8) {
		limit := int(capByte)%64 + 1
		whole, errWhole := readAll(t, NewReader(bytes.NewReader(in), limit))
		oneByte, errOne := readAll(t, NewReader(iotest.OneByteReader(bytes.NewReader(in)), limit))
		require.NoError(t, errWhole)
		require.NoError(t, errOne)
		require.Equal(t, whole, oneByte, "the result does not depend on read boundaries")

		for _, g := range whole {
			if g.TooLarge {
				require.Greater(t, g.Size, int64(limit))
				require.LessOrEqual(t, len(g.Prefix), 4096)
				continue
			}
			require.LessOrEqual(t, len(g.Data), limit, "no event's data is over the cap")
			if strings.Contains(g.Data, "\r") {
				continue // cannot happen (CR ends a line), but Write refuses it
			}
			// An event read back from what Write writes is the same event.
			// (The cap is on data; an id or type line as long as the cap
			// needs a little more room once Write adds its space.)
			var buf bytes.Buffer
			require.NoError(t, Write(&buf, Event{Type: g.Type, Data: []byte(g.Data), ID: g.ID}, 0))
			back, err := readAll(t, NewReader(&buf, limit+8))
			require.NoError(t, err)
			require.Equal(t, []got{{Type: g.Type, Data: g.Data, ID: g.ID}}, back)
		}
	})
}

// chunks is a source that returns one chunk per Read and, before each
// Read, lets the test look at the reader.
type chunks struct {
	parts  []string
	before func(p []byte)
}

func (c *chunks) Read(p []byte) (int, error) {
	c.before(p)
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	if c.parts[0] = c.parts[0][n:]; c.parts[0] == "" {
		c.parts = c.parts[1:]
	}
	return n, nil
}

func TestAnIdleStreamHoldsNoBuffer(t *testing.T) {
	long := strings.Repeat("x", 3*bufferSize)
	src := &chunks{parts: []string{"data: one\n\n", "data: " + long[:100], long[100:] + "\n\n", "data: three\n", "\n"}}
	r := NewReader(src, 0)
	var idleReads, busyReads int
	src.before = func(p []byte) {
		if len(p) == firstReadSize {
			// The read that waits for the next line: nothing is held.
			assert.Nil(t, r.in.buf, "a buffer is held while the stream waits between lines")
			idleReads++
		} else {
			assert.NotNil(t, r.in.buf)
			busyReads++
		}
	}
	for _, want := range []string{"one", long, "three"} {
		ev, err := r.Next()
		require.NoError(t, err)
		assert.Equal(t, want, string(ev.Data))
	}
	_, err := r.Next()
	assert.ErrorIs(t, err, io.EOF)
	assert.Nil(t, r.in.buf, "the buffer goes back at the end of the stream")
	// The first read, then one after each event and before the end.
	assert.GreaterOrEqual(t, idleReads, 5, "the stream waits between lines without a buffer")
	assert.Positive(t, busyReads, "the rest of a long line is read into the borrowed buffer")
}

package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
)

// ServeStdio serves one client over newline-delimited JSON-RPC: its
// messages are the lines of r (a trailing CR is dropped, a line longer
// than Options.MaxMessageSize is skipped), the server's go to w, one line
// each. It returns when r ends (nil), ctx ends (nil), the session closes,
// or a write fails (that error); by then nothing more is written to w,
// the session is closed and its requests cancelled. A read of r in
// progress finishes on its own goroutine when r ends.
//
// Answers to requests that arrive together (read in one go) are written
// together, after the last of them has been handled.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	out := &stdioWriter{bw: bufio.NewWriterSize(w, 64<<10)}
	conn := newConnection(s, out, nil)
	br := bufio.NewReaderSize(r, 64<<10)
	max := s.opts.MaxMessageSize
	read := func(context.Context) ([]byte, error) { return readLine(br, max) }
	batch := func() bool {
		b, _ := br.Peek(br.Buffered())
		return bytes.IndexByte(b, '\n') >= 0
	}
	return conn.serve(ctx, read, batch)
}

// readLine reads one line without its line break, at most max bytes (a
// longer line is read whole and returned empty).
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		if len(line) > max {
			return nil, err
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
	// A line longer than the buffer: keep its start before the next read
	// overwrites it.
	long := append([]byte(nil), line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = br.ReadSlice('\n')
		if long != nil && len(long)+len(line) <= max {
			long = append(long, line...)
		} else {
			long = nil
		}
	}
	return bytes.TrimRight(long, "\r\n"), err
}

// stdioWriter is the Wire of stdio: one line per message.
type stdioWriter struct{ bw *bufio.Writer }

func (w *stdioWriter) Kind() WireKind      { return WireStdio }
func (w *stdioWriter) Header() http.Header { return nil }
func (w *stdioWriter) Flush() error        { return w.bw.Flush() }

func (w *stdioWriter) WriteMessage(data []byte) error {
	if _, err := w.bw.Write(data); err != nil {
		return err
	}
	return w.bw.WriteByte('\n')
}

func (w *stdioWriter) WriteBytes(b []byte) error {
	_, err := w.bw.Write(b)
	return err
}

func (w *stdioWriter) writeFrame(frame []byte, flush bool) error {
	if err := w.WriteMessage(frame); err != nil {
		return err
	}
	if flush {
		return w.bw.Flush()
	}
	return nil
}

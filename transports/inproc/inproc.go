// Package inproc connects to an MCP server that runs inside the host's own
// process ("type": "sdk"), so that a host can supervise a Go MCP server
// exactly as it supervises a subprocess: same framing, same size cap, same
// shutdown ladder, same failure reports.
//
// The server is anything with a ServeMCP method (or a ServerFunc) that
// reads newline-delimited JSON-RPC from r and writes newline-delimited
// JSON-RPC to w, which is what every Go MCP SDK's stdio server takes. The
// r and w it is given also implement io.Closer, so they fit the official
// Go SDK's IOTransport as they are:
//
//	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1.0.0"}, nil)
//	server := inproc.ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
//		return srv.Run(ctx, &mcp.IOTransport{Reader: r.(io.ReadCloser), Writer: w.(io.WriteCloser)})
//	})
//
// and mcp-go's stdio server:
//
//	s := server.NewMCPServer("notes", "1.0.0")
//	srv := inproc.ServerFunc(func(ctx context.Context, r io.Reader, w io.Writer) error {
//		return server.NewStdioServer(s).Listen(ctx, r, w)
//	})
//
// The connection ends when ServeMCP returns (or panics: the panic is
// recovered and reported as a *PanicError). Close ends the server's input
// (it reads io.EOF), waits Options.CloseTimeout for ServeMCP to return,
// then cancels ServeMCP's context and waits again, bounded by Close's own
// context; a server that still runs after that is reported, not waited
// for.
package inproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/internal/routine"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Server is an MCP server that serves one connection per ServeMCP call.
type Server interface {
	// ServeMCP reads JSON-RPC messages from r, one per line, and writes
	// its own to w, each followed by a newline, until r reports io.EOF or
	// ctx is cancelled; returning ends the connection. Each Write to w is
	// delivered whole (concurrent Writes do not interleave), so a server
	// that writes one message per Write may write from several
	// goroutines. r and w also implement io.Closer: closing r makes
	// further sends to the server fail, closing w ends the connection.
	ServeMCP(ctx context.Context, r io.Reader, w io.Writer) error
}

// ServerFunc adapts a function to the Server interface.
type ServerFunc func(ctx context.Context, r io.Reader, w io.Writer) error

// ServeMCP calls f.
func (f ServerFunc) ServeMCP(ctx context.Context, r io.Reader, w io.Writer) error {
	return f(ctx, r, w)
}

// Options tune an in-process connection. The zero value is usable.
type Options struct {
	// MaxFrameSize caps one frame the server writes (without its
	// newline). A longer line is dropped and reported through
	// Receiver.FrameError; the connection continues. Zero means
	// transports.DefaultMaxFrameSize (16 MiB).
	MaxFrameSize int

	// CloseTimeout is how long Close waits for ServeMCP to return after
	// its input ended, before cancelling its context, and again after
	// cancelling it. Zero means 2 s.
	CloseTimeout time.Duration

	// Logger receives the transport's diagnostics (a recovered panic, a
	// server that will not stop). The zero value logs nothing.
	Logger zerolog.Logger
}

func (o *Options) withDefaults() Options {
	out := *o
	if out.MaxFrameSize <= 0 {
		out.MaxFrameSize = transports.DefaultMaxFrameSize
	}
	if out.CloseTimeout <= 0 {
		out.CloseTimeout = 2 * time.Second
	}
	return out
}

const (
	// retainedBufferLimit: write buffers that grew beyond this for one
	// big frame are not kept for the next.
	retainedBufferLimit = 1 << 20
	// outputClosedWait is how long, after the server closed its output,
	// the reader waits for ServeMCP to return so that Closed can say how
	// it ended.
	outputClosedWait = 250 * time.Millisecond
)

// ExitError reports that ServeMCP returned, which ended the connection.
// It matches transports.ErrClosed, and Err (nil when ServeMCP returned
// nil), with errors.Is and errors.As.
type ExitError struct {
	Err error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return "inproc: the server returned"
	}
	return "inproc: the server returned: " + e.Err.Error()
}

// Unwrap gives transports.ErrClosed and the server's error.
func (e *ExitError) Unwrap() []error {
	if e.Err == nil {
		return []error{transports.ErrClosed}
	}
	return []error{transports.ErrClosed, e.Err}
}

// PanicError is the Err of an ExitError when ServeMCP panicked. The panic
// was recovered; it did not take the host down.
type PanicError struct {
	Value any    // what was passed to panic
	Stack []byte // the panicking goroutine's stack
}

func (e *PanicError) Error() string { return fmt.Sprintf("inproc: the server panicked: %v", e.Value) }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Conn is a connection to an in-process server. Its goroutines, both
// started by Dial: the server (ServeMCP, then the closing of its pipes)
// and the reader (the server's output → Receiver). Send runs on its
// caller's goroutine; Close ends both goroutines, or reports the server's
// as leaked.
type Conn struct {
	opts Options
	recv transports.Receiver
	log  zerolog.Logger

	in   *input         // the server's input: Send writes, ServeMCP reads
	outR *io.PipeReader // the server's output, read by the reader
	outW *io.PipeWriter // given to ServeMCP; closed by the server goroutine when it returns

	cancelServe context.CancelFunc // cancels ServeMCP's context

	// wlock is a one-slot semaphore serialising Send; a channel rather
	// than a mutex so that a Send waiting for it can give up on ctx.
	wlock chan struct{}
	wbuf  []byte // guarded by wlock
	werr  error  // guarded by wlock; non-nil once a frame was cut off

	served   chan struct{} // closed by the server goroutine after ServeMCP returned
	serveErr error         // written by the server goroutine before served is closed

	readerDone chan struct{} // closed by the reader after Receiver.Closed

	mu       sync.Mutex
	closedBy error // guarded by mu: why this side ended the connection (Close, a cut frame); nil if it did not

	closeOnce sync.Once
	closeDone chan struct{} // closed when the first Close finished its ladder
	closeErr  error         // written by the first Close before closeDone is closed
}

var _ transports.Conn = (*Conn)(nil)

// Dial starts srv.ServeMCP on its own goroutine and returns the
// connection to it. Frames and the connection's end are delivered to
// recv. ctx bounds only the start: ServeMCP's context carries ctx's
// values but not its cancellation; it is cancelled by Close.
func Dial(ctx context.Context, srv Server, opts Options, recv transports.Receiver) (*Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("inproc: %w", err)
	}
	if srv == nil {
		return nil, &transports.ConfigError{Err: errors.New("inproc: no server")}
	}
	o := opts.withDefaults()
	serveCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	outR, outW := io.Pipe()
	c := &Conn{
		opts:        o,
		recv:        recv,
		log:         o.Logger,
		in:          newInput(),
		outR:        outR,
		outW:        outW,
		cancelServe: cancel,
		wlock:       make(chan struct{}, 1),
		served:      make(chan struct{}),
		readerDone:  make(chan struct{}),
		closeDone:   make(chan struct{}),
	}
	routine.Go("inproc.serve", func() { c.serve(serveCtx, srv) })
	routine.Go("inproc.read", c.read)
	return c, nil
}

// serve runs ServeMCP, then ends the pipes so that Send fails and the
// reader, once it has drained the output, reports Closed.
func (c *Conn) serve(ctx context.Context, srv Server) {
	err := func() (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = &PanicError{Value: v, Stack: debug.Stack()}
			}
		}()
		return srv.ServeMCP(ctx, c.in, c.outW)
	}()
	var pe *PanicError
	if errors.As(err, &pe) {
		c.log.Error().Interface("panic", pe.Value).Bytes("stack", pe.Stack).Msg("in-process MCP server panicked")
	}
	c.serveErr = err
	close(c.served)
	c.in.closeWith(io.EOF)
	c.outW.Close()
}

// Send writes frame and a newline to the server's input. The input is a
// synchronous pipe, so a frame counts as written once the server has read
// all of it. If ctx ends before the server has read any of it, Send
// returns ctx's error and the connection is intact; if it ends after the
// server has read part of it, the stream is corrupt: the server's input
// is ended with an error, its context cancelled, and Send returns an
// error matching transports.ErrClosed.
func (c *Conn) Send(ctx context.Context, frame []byte) error {
	select {
	case c.wlock <- struct{}{}:
	default:
		select {
		case c.wlock <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("inproc: send: %w", ctx.Err())
		case <-c.in.done:
			return c.inputGone()
		}
	}
	defer func() { <-c.wlock }()
	if c.werr != nil {
		return c.werr
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("inproc: send: %w", err)
	}
	buf := append(append(c.wbuf[:0], frame...), '\n')
	if cap(buf) <= retainedBufferLimit {
		c.wbuf = buf
	}
	n, err := c.in.write(ctx, buf)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errInputClosed):
		return c.inputGone()
	case n == 0:
		return fmt.Errorf("inproc: send: %w", err) // ctx ended; nothing was read
	}
	c.werr = fmt.Errorf("%w: inproc: send gave up after the server read %d of %d bytes (%v); the stream is cut", transports.ErrClosed, n, len(buf), err)
	c.log.Warn().Int("read", n).Int("size", len(buf)).Msg("in-process server stopped reading mid-frame; ending the connection")
	c.endFromHere(c.werr)
	c.in.closeWith(c.werr)
	c.cancelServe()
	return c.werr
}

// inputGone is Send's error once the server's input is closed.
func (c *Conn) inputGone() error {
	if by := c.endedBy(); by != nil {
		return by
	}
	select {
	case <-c.served:
		return fmt.Errorf("%w: inproc: the server has returned", transports.ErrClosed)
	default:
		return fmt.Errorf("%w: inproc: the server closed its input", transports.ErrClosed)
	}
}

// endFromHere records why this side ended the connection; the first
// reason stands.
func (c *Conn) endFromHere(err error) {
	c.mu.Lock()
	if c.closedBy == nil {
		c.closedBy = err
	}
	c.mu.Unlock()
}

func (c *Conn) endedBy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closedBy
}

// read delivers the server's output lines until the output ends, then
// reports Closed.
func (c *Conn) read() {
	defer close(c.readerDone)
	err := transports.ReadLines(c.outR, int64(c.opts.MaxFrameSize), c.recv)
	c.recv.Closed(c.cause(err))
}

// cause explains why the server's output ended.
func (c *Conn) cause(readErr error) error {
	if by := c.endedBy(); by != nil {
		return by
	}
	exit := func() error { return &ExitError{Err: c.serveErr} }
	select {
	case <-c.served:
		return exit()
	default:
	}
	// The server closed w itself; give ServeMCP a moment to return so
	// that the cause can say how it ended.
	t := time.NewTimer(outputClosedWait)
	defer t.Stop()
	select {
	case <-c.served:
		if by := c.endedBy(); by != nil {
			return by
		}
		return exit()
	case <-t.C:
	}
	if by := c.endedBy(); by != nil {
		return by
	}
	if readErr == io.EOF {
		return fmt.Errorf("%w: inproc: the server closed its output but ServeMCP has not returned", transports.ErrClosed)
	}
	return fmt.Errorf("%w: inproc: reading the server's output: %v", transports.ErrClosed, readErr)
}

// Close ends the connection: it ends the server's input (ServeMCP reads
// io.EOF), waits up to Options.CloseTimeout for ServeMCP to return, then
// cancels ServeMCP's context and waits up to CloseTimeout again; all of
// it bounded by ctx. If ServeMCP still runs after that, Close cuts the
// server's output (its writes fail), reports Closed, and returns an error
// saying that the server's goroutine is leaked. Close is idempotent and
// safe to call concurrently: later calls wait for the first one's result,
// bounded by their own ctx.
func (c *Conn) Close(ctx context.Context) error {
	first := false
	c.closeOnce.Do(func() { first = true })
	if !first {
		select {
		case <-c.closeDone:
			return c.closeErr
		case <-ctx.Done():
			return fmt.Errorf("inproc: close still in progress: %w", ctx.Err())
		}
	}
	defer close(c.closeDone)
	c.endFromHere(transports.ErrClosed)
	c.in.closeWith(io.EOF)

	if !c.waitServed(ctx, c.opts.CloseTimeout) {
		c.log.Debug().Msg("in-process server did not return after its input ended; cancelling its context")
		c.cancelServe()
		if !c.waitServed(ctx, c.opts.CloseTimeout) {
			c.outR.CloseWithError(transports.ErrClosed) // the reader ends; the server's writes fail
			if err := ctx.Err(); err != nil {
				c.closeErr = fmt.Errorf("inproc: ServeMCP had not returned when Close gave up (%w); its context is cancelled, and its goroutine leaks if it ignores that", err)
			} else {
				c.closeErr = fmt.Errorf("inproc: ServeMCP ignored the end of its input and the cancellation of its context for %v; its goroutine is leaked", 2*c.opts.CloseTimeout)
			}
			c.log.Warn().Err(c.closeErr).Msg("in-process server did not stop")
		}
	}
	c.cancelServe() // release the context's resources
	select {
	case <-c.readerDone:
	case <-ctx.Done():
		if c.closeErr == nil {
			c.closeErr = fmt.Errorf("inproc: close: the receiver is still handling the server's last frames: %w", ctx.Err())
		}
	}
	return c.closeErr
}

// waitServed waits up to d, bounded by ctx, for ServeMCP to return.
func (c *Conn) waitServed(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.served:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	select {
	case <-c.served:
		return true
	default:
		return false
	}
}

// errInputClosed is what a write to a closed input returns.
var errInputClosed = errors.New("inproc: input closed")

// input is the server's end of the connection's input: an in-memory,
// synchronous pipe like io.Pipe, except that a writer waiting for the
// server to read can withdraw, which is how Send honours its context
// without cutting a frame in two.
type input struct {
	offer chan []byte // a writer offers the rest of its frame here
	taken chan int    // and learns from the reader how much was copied
	done  chan struct{}
	once  sync.Once
	err   error // what Read returns once done is closed; written before
}

func newInput() *input {
	return &input{offer: make(chan []byte), taken: make(chan int), done: make(chan struct{})}
}

// Read copies the next bytes the connection sends. It returns io.EOF once
// the connection is closing.
func (p *input) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	select {
	case <-p.done:
		return 0, p.err
	default:
	}
	select {
	case chunk := <-p.offer:
		n := copy(b, chunk)
		p.taken <- n
		return n, nil
	case <-p.done:
		return 0, p.err
	}
}

// Close is the server's way to say it reads no more: sends fail.
func (p *input) Close() error {
	p.closeWith(io.ErrClosedPipe)
	return nil
}

func (p *input) closeWith(err error) {
	p.once.Do(func() {
		p.err = err
		close(p.done)
	})
}

// write hands b to the reader and returns how much of it was read. It
// gives up when ctx ends or the input is closed (errInputClosed).
func (p *input) write(ctx context.Context, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		select {
		case p.offer <- b[n:]:
			n += <-p.taken
		case <-p.done:
			return n, errInputClosed
		case <-ctx.Done():
			return n, ctx.Err()
		}
	}
	return n, nil
}

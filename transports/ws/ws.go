// Package ws is the WebSocket transport ("type": "ws"): one text message
// per JSON-RPC message, over a connection that negotiated the "mcp"
// subprotocol. It uses github.com/coder/websocket over the server's HTTP
// client (TLS settings, proxy from the environment).
//
// Liveness is checked with WebSocket pings: a server that does not answer
// one within Options.PingTimeout is considered gone, and the connection
// ends with ErrPingTimeout.
//
// A message over the size cap is read to its end and dropped, reported
// through Receiver.FrameError; the connection continues.
package ws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/internal/routine"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/httpclient"
)

// Subprotocol is the WebSocket subprotocol the transport requires.
const Subprotocol = "mcp"

// Options tune a connection. The zero value is usable.
type Options struct {
	// Client performs the handshake. Nil means one built by
	// httpclient.New from the server's config (TLS settings, proxy from
	// the environment), whose idle connections Close releases.
	Client *http.Client

	// MaxFrameSize caps one message. A larger message is read to its end,
	// dropped and reported through Receiver.FrameError; the connection
	// continues. Zero means transports.DefaultMaxFrameSize (16 MiB).
	MaxFrameSize int

	// PingInterval is the time between two pings. Zero means 15 s; a
	// negative value sends no pings.
	PingInterval time.Duration

	// PingTimeout is how long a ping waits for its pong before the
	// connection is given up. Zero means 10 s.
	PingTimeout time.Duration

	// UserAgent is sent with the handshake unless the config's headers
	// set one.
	UserAgent string

	// Logger receives diagnostics at debug level. The zero value logs
	// nothing. Header values are never logged.
	Logger zerolog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = transports.DefaultMaxFrameSize
	}
	if o.PingInterval == 0 {
		o.PingInterval = 15 * time.Second
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = 10 * time.Second
	}
	return o
}

const (
	// prefixSize is how much of an oversize message is kept for its error.
	prefixSize = 4 << 10
	// retainedBufferLimit: a read buffer that grew beyond this for one
	// big message is not kept for the next.
	retainedBufferLimit = 1 << 20
)

// ErrPingTimeout ends a connection whose server did not answer a ping
// within Options.PingTimeout. It matches context.DeadlineExceeded, so
// transports.Classify calls it a timeout.
var ErrPingTimeout = fmt.Errorf("ws: the server did not answer a ping in time: %w", context.DeadlineExceeded)

// SubprotocolError reports a server that completed the handshake without
// agreeing to the "mcp" subprotocol. Dial returns it wrapped in a
// *transports.ConfigError: the URL is not an MCP WebSocket endpoint.
type SubprotocolError struct {
	Got string // the subprotocol the server chose; empty for none
}

func (e *SubprotocolError) Error() string {
	if e.Got == "" {
		return fmt.Sprintf("ws: the server did not agree to the %q subprotocol (it chose none)", Subprotocol)
	}
	return fmt.Sprintf("ws: the server did not agree to the %q subprotocol (it chose %q)", Subprotocol, e.Got)
}

// CloseError is the cause Closed reports when the server closed the
// connection with a close frame. Whatever the code, it matches
// transports.ErrClosed: the server ended the connection in order (as a
// process exits, with a status). A connection that ends without a close
// frame is reported as broken instead (io.ErrUnexpectedEOF).
type CloseError struct {
	Code   int    // the WebSocket status code (1000: normal closure)
	Reason string // the server's reason, if any
}

func (e *CloseError) Error() string {
	msg := fmt.Sprintf("ws: the server closed the connection with status %d", e.Code)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// Unwrap makes a close frame match transports.ErrClosed.
func (e *CloseError) Unwrap() error { return transports.ErrClosed }

// Conn is one WebSocket connection.
//
// Concurrency: Dial starts two goroutines, the reader (the only caller of
// the Receiver, and the only one to read the connection) and the pinger;
// both end when the connection does. Send runs in its callers' goroutines,
// one at a time (wlock). The first reason the connection ends is recorded
// in closedBy, under mu, and done is closed.
type Conn struct {
	opts      Options
	recv      transports.Receiver
	log       zerolog.Logger
	ws        *websocket.Conn
	client    *http.Client
	ownClient bool // client was built by Dial; Close releases its idle connections

	// readCtx bounds the reader's reads. Cancelling it makes the library
	// drop the TCP connection at once, which is how a stuck send, a
	// missed pong or an impatient Close end the connection.
	readCtx    context.Context
	cancelRead context.CancelFunc

	// wlock is a one-slot semaphore serialising Send; a channel rather
	// than a mutex so that a Send waiting for it can give up on ctx.
	wlock chan struct{}

	mu       sync.Mutex
	closedBy error         // guarded by mu: the first reason the connection ended
	done     chan struct{} // closed when closedBy is set

	readerDone    chan struct{} // closed by the reader after Receiver.Closed
	pingerDone    chan struct{} // closed by the pinger
	closeOnce     sync.Once
	handshakeDone chan struct{} // closed when Close's close handshake returned
}

var _ transports.Conn = (*Conn)(nil)

// Dial opens a WebSocket to cfg.URL (ws, wss, or their http and https
// spellings) with cfg.Headers on the handshake and the "mcp"
// subprotocol. ctx bounds only the handshake.
//
// Errors: *transports.ConfigError for a bad URL, an unusable TLS config or
// a server that did not agree to "mcp" (*SubprotocolError);
// *transports.HTTPStatusError when the server answered the handshake with
// a status other than 101; the network's error otherwise.
func Dial(ctx context.Context, cfg transports.Config, opts Options, recv transports.Receiver) (*Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ws: %w", err)
	}
	u, err := httpclient.ParseURL(cfg.URL, "ws", "wss", "http", "https")
	if err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	client, own := o.Client, false
	if client == nil {
		if client, err = httpclient.New(cfg, httpclient.Options{}); err != nil {
			return nil, err
		}
		own = true
	}
	fail := func(err error) (*Conn, error) {
		if own {
			client.CloseIdleConnections()
		}
		return nil, err
	}
	wsc, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{
		HTTPClient:   client,
		HTTPHeader:   httpclient.Header(cfg, o.UserAgent),
		Subprotocols: []string{Subprotocol},
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return fail(transports.NewHTTPStatusError(resp))
		}
		if ctx.Err() != nil {
			return fail(fmt.Errorf("ws: dialing %s: %w", transports.SafeURL(u), ctx.Err()))
		}
		return fail(fmt.Errorf("ws: dialing %s: %w", transports.SafeURL(u), transports.RedactURLError(err)))
	}
	if p := wsc.Subprotocol(); p != Subprotocol {
		wsc.CloseNow()
		return fail(&transports.ConfigError{Err: &SubprotocolError{Got: p}})
	}
	// The reader enforces MaxFrameSize itself, without ending the
	// connection; the library's limit would end it.
	wsc.SetReadLimit(-1)

	readCtx, cancelRead := context.WithCancel(context.Background())
	c := &Conn{
		opts:          o,
		recv:          recv,
		log:           o.Logger,
		ws:            wsc,
		client:        client,
		ownClient:     own,
		readCtx:       readCtx,
		cancelRead:    cancelRead,
		wlock:         make(chan struct{}, 1),
		done:          make(chan struct{}),
		readerDone:    make(chan struct{}),
		pingerDone:    make(chan struct{}),
		handshakeDone: make(chan struct{}),
	}
	routine.Go("ws.read", c.read)
	routine.Go("ws.ping", c.ping)
	return c, nil
}

// end records the first reason the connection ends. It reports whether
// this call was the first.
func (c *Conn) end(err error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closedBy != nil {
		return false
	}
	c.closedBy = err
	close(c.done)
	return true
}

func (c *Conn) endedBy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closedBy
}

// kill ends the connection at once, without a close handshake.
func (c *Conn) kill(err error) {
	c.end(err)
	c.cancelRead()
	c.ws.CloseNow()
}

// closedErr is what Send returns once the connection has ended.
func closedErr(by error) error {
	if errors.Is(by, transports.ErrClosed) {
		return by
	}
	return fmt.Errorf("%w: %w", transports.ErrClosed, by)
}

// Send writes frame as one text message. Sends wait for each other; one
// that gives up on ctx while waiting leaves the connection intact. Once
// the message has started, it cannot be withdrawn: if ctx ends before the
// write completes, the connection is closed (a WebSocket cannot carry half
// a message) and Send returns an error matching transports.ErrClosed.
func (c *Conn) Send(ctx context.Context, frame []byte) error {
	select {
	case c.wlock <- struct{}{}:
	default:
		select {
		case c.wlock <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("ws: send: %w", ctx.Err())
		case <-c.done:
			return closedErr(c.endedBy())
		}
	}
	defer func() { <-c.wlock }()
	if by := c.endedBy(); by != nil {
		return closedErr(by)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ws: send: %w", err)
	}
	// The library would also close the connection when the write's
	// context ends mid-write, but it would not say whether anything had
	// been written; doing it here keeps that knowledge.
	stop := context.AfterFunc(ctx, func() {
		c.log.Debug().Msg("a send was abandoned mid-message; closing the connection")
		c.kill(fmt.Errorf("%w: ws: a send was abandoned mid-message: %w", transports.ErrClosed, context.Cause(ctx)))
	})
	err := c.ws.Write(context.Background(), websocket.MessageText, frame)
	stopped := stop()
	switch {
	case err == nil:
		return nil
	case !stopped:
		return fmt.Errorf("%w: ws: send abandoned mid-message: %w", transports.ErrClosed, ctx.Err())
	}
	// The library closes the connection on any write error.
	c.kill(fmt.Errorf("ws: write: %w", err))
	return closedErr(c.endedBy())
}

// read delivers messages until the connection ends, then reports Closed.
func (c *Conn) read() {
	defer close(c.readerDone)
	limit := int64(c.opts.MaxFrameSize)
	var msg bytes.Buffer
	var err error
	for {
		var typ websocket.MessageType
		var r io.Reader
		typ, r, err = c.ws.Reader(c.readCtx)
		if err != nil {
			break
		}
		msg.Reset()
		if _, err = msg.ReadFrom(io.LimitReader(r, limit+1)); err != nil {
			break
		}
		if int64(msg.Len()) > limit {
			prefix := bytes.Clone(msg.Bytes()[:min(msg.Len(), prefixSize)])
			var rest int64
			if rest, err = io.Copy(io.Discard, r); err != nil {
				break
			}
			c.recv.FrameError(&transports.FrameTooLargeError{Size: int64(msg.Len()) + rest, Limit: limit, Prefix: prefix})
		} else if len(bytes.TrimSpace(msg.Bytes())) > 0 {
			if typ != websocket.MessageText {
				c.log.Debug().Msg("a binary message; delivered as a frame all the same")
			}
			c.recv.Frame(msg.Bytes())
		}
		if msg.Cap() > retainedBufferLimit {
			msg = bytes.Buffer{}
		}
	}
	cause := c.cause(err)
	if c.end(cause) {
		// The connection ended here: release it. Otherwise whoever ended
		// it (Close's handshake, kill) releases it.
		c.cancelRead()
		c.ws.CloseNow()
	}
	c.recv.Closed(cause)
}

// cause explains why the reader stopped.
func (c *Conn) cause(readErr error) error {
	if by := c.endedBy(); by != nil {
		return by
	}
	var ce websocket.CloseError
	switch {
	case errors.As(readErr, &ce):
		return &CloseError{Code: int(ce.Code), Reason: ce.Reason}
	case errors.Is(readErr, io.EOF), errors.Is(readErr, io.ErrUnexpectedEOF):
		return fmt.Errorf("ws: the connection ended without a close frame: %w", io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("ws: reading: %w", readErr)
}

// ping checks every PingInterval that the server answers, and gives the
// connection up when it does not.
func (c *Conn) ping() {
	defer close(c.pingerDone)
	if c.opts.PingInterval < 0 {
		return
	}
	t := time.NewTicker(c.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.PingTimeout)
		err := c.ws.Ping(ctx)
		timedOut := ctx.Err() != nil
		cancel()
		select {
		case <-c.done:
			return // the failure, if any, is the connection's end
		default:
		}
		switch {
		case err == nil:
		case timedOut:
			c.log.Debug().Dur("timeout", c.opts.PingTimeout).Msg("no pong; giving the connection up")
			c.kill(fmt.Errorf("%w (%v)", ErrPingTimeout, c.opts.PingTimeout))
			return
		default:
			c.kill(fmt.Errorf("ws: ping: %w", err))
			return
		}
	}
}

// Close ends the connection with a close handshake (status 1000, normal
// closure), bounded by ctx: if the server has not answered when ctx ends,
// the TCP connection is dropped and Close returns an error saying so.
// Closed reports transports.ErrClosed. Close is idempotent and safe to
// call concurrently with Send and with itself.
func (c *Conn) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.end(transports.ErrClosed)
		go func() {
			defer close(c.handshakeDone)
			if err := c.ws.Close(websocket.StatusNormalClosure, ""); err != nil {
				c.log.Debug().Err(err).Msg("close handshake")
			}
		}()
	})
	for _, done := range []chan struct{}{c.readerDone, c.pingerDone, c.handshakeDone} {
		select {
		case <-done:
		case <-ctx.Done():
			// Drop the connection: the reader ends at once; the library's
			// handshake waits at most its own 5 s for the server's close
			// frame, then ends too.
			c.cancelRead()
			return fmt.Errorf("ws: close: the close handshake did not finish: %w", ctx.Err())
		}
	}
	c.cancelRead()
	if c.ownClient {
		c.client.CloseIdleConnections()
	}
	return nil
}

// Package sse is the legacy HTTP+SSE transport of MCP (protocol version
// 2024-11-05), which servers that predate Streamable HTTP still speak.
//
// The client opens one long GET whose response is an event stream. The
// server's first event, of type "endpoint", names (as a URI reference,
// resolved against the GET's URL) where the client POSTs its messages;
// every later "message" event carries one message from the server. A
// POST's response body is ignored: the answer to a request arrives on the
// event stream.
//
// The endpoint must be on the same origin (scheme, host and port) as the
// server's URL: the configured headers, credentials included, go with
// every POST, and a server must not be able to send them elsewhere.
//
// The connection is the GET stream: when it ends or breaks, Receiver.Closed
// reports it, and reconnecting is the caller's decision. A POST answered
// 404 or 410 means the server no longer knows the session; that too ends
// the connection.
package sse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/internal/routine"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/eventstream"
	"github.com/mcpvisor/mcpvisor/transports/httpclient"
)

// Options tune a connection. The zero value is usable.
type Options struct {
	// Client sends the GET and the POSTs. Nil means one built by
	// httpclient.New from the server's config (TLS settings, proxy from
	// the environment), whose idle connections Close releases. A client
	// given here must not set Timeout, which would cut the event stream.
	Client *http.Client

	// MaxFrameSize caps one event's data, that is one message. A larger
	// event is dropped and reported through Receiver.FrameError; the
	// connection continues. Zero means transports.DefaultMaxFrameSize
	// (16 MiB).
	MaxFrameSize int

	// EndpointTimeout bounds Dial's wait for the endpoint event, counted
	// from the start of the GET. Zero means Dial's context alone bounds
	// it.
	EndpointTimeout time.Duration

	// UserAgent is sent unless the config's headers set one.
	UserAgent string

	// Logger receives diagnostics at debug level (events of other types,
	// the endpoint's path). The zero value logs nothing. Header values
	// and the endpoint's query (which holds the session id) are never
	// logged.
	Logger zerolog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = transports.DefaultMaxFrameSize
	}
	return o
}

const (
	contentEventStream = "text/event-stream"
	contentJSON        = "application/json"
	// drainLimit bounds how much of a POST's (ignored) response body is
	// read so that its connection can be reused.
	drainLimit = 64 << 10
)

// OriginError reports an endpoint event naming another origin than the
// server's URL. Dial refuses it, wrapped in a *transports.ConfigError:
// following it would send the configured headers to another server, and
// retrying does not help.
type OriginError struct {
	Server   string // the origin of the configured URL: scheme://host:port
	Endpoint string // the origin the endpoint event named
}

func (e *OriginError) Error() string {
	return fmt.Sprintf("sse: the server's endpoint event names another origin (%s) than its URL (%s); refusing to send messages there", e.Endpoint, e.Server)
}

// Conn is one legacy SSE connection.
//
// Concurrency: the reader goroutine, started by Dial, owns the GET
// stream and is the only caller of the Receiver. Send runs in its callers'
// goroutines, one POST each, counted by sends. Everything the connection
// does ends with ctx, which end cancels.
type Conn struct {
	opts      Options
	recv      transports.Receiver
	log       zerolog.Logger
	client    *http.Client
	ownClient bool        // client was built by Dial; Close releases its idle connections
	header    http.Header // the config's headers and User-Agent; read-only after Dial
	endpoint  string      // where messages are POSTed; read-only after Dial
	safeEP    string      // the endpoint without its query, for errors

	ctx    context.Context // the connection's life
	cancel context.CancelCauseFunc

	readerDone chan struct{} // closed by the reader after Receiver.Closed

	mu       sync.Mutex
	closedBy error          // guarded by mu: why the connection was ended from this side; nil while it was not
	sends    sync.WaitGroup // POSTs in flight; Add only under mu while closedBy is nil

	closeOnce sync.Once
	sendsDone chan struct{} // closed once the POSTs in flight at Close have returned
}

var _ transports.Conn = (*Conn)(nil)

// Dial opens the event stream at cfg.URL and waits for the server's
// endpoint event, bounded by ctx and Options.EndpointTimeout. The stream
// outlives ctx; it ends with Close, with the server, or with a POST the
// server answers 404 or 410. Events before the endpoint event are
// dropped.
//
// Errors: *transports.ConfigError for a URL that is not http(s), an
// unusable TLS config, a response that is not an event stream, or an
// endpoint on another origin (*OriginError); *transports.HTTPStatusError
// when the GET is answered with a status other than 2xx; an error
// matching context.DeadlineExceeded when no endpoint event came in time;
// the network's error otherwise.
func Dial(ctx context.Context, cfg transports.Config, opts Options, recv transports.Receiver) (*Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sse: %w", err)
	}
	u, err := httpclient.ParseURL(cfg.URL, "http", "https")
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
	connCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	c := &Conn{
		opts:       o,
		recv:       recv,
		log:        o.Logger,
		client:     client,
		ownClient:  own,
		header:     httpclient.Header(cfg, o.UserAgent),
		ctx:        connCtx,
		cancel:     cancel,
		readerDone: make(chan struct{}),
		sendsDone:  make(chan struct{}),
	}

	// Until the endpoint arrives, the stream is bounded by ctx and
	// EndpointTimeout; after that, by the connection alone.
	waitCtx, cancelWait := ctx, context.CancelFunc(func() {})
	if o.EndpointTimeout > 0 {
		waitCtx, cancelWait = context.WithTimeoutCause(ctx, o.EndpointTimeout,
			fmt.Errorf("sse: no endpoint event within %v: %w", o.EndpointTimeout, context.DeadlineExceeded))
	}
	defer cancelWait()
	stop := context.AfterFunc(waitCtx, func() { cancel(context.Cause(waitCtx)) })
	fail := func(err error) (*Conn, error) {
		stop()
		// Whatever broke when time had run out broke because of that.
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("sse: connecting to %s: %w", transports.SafeURL(u), ctx.Err())
		case waitCtx.Err() != nil:
			err = context.Cause(waitCtx) // EndpointTimeout's own error
		}
		cancel(err)
		if own {
			client.CloseIdleConnections()
		}
		return nil, err
	}

	req, err := http.NewRequestWithContext(connCtx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fail(&transports.ConfigError{Err: fmt.Errorf("url: %w", transports.RedactURLError(err))})
	}
	req.Header = c.header.Clone()
	req.Header.Set("Accept", contentEventStream)
	req.Header.Set("Cache-Control", "no-cache")
	resp, err := client.Do(req)
	if err != nil {
		return fail(fmt.Errorf("sse: GET %s: %w", transports.SafeURL(u), transports.RedactURLError(err)))
	}
	if resp.StatusCode/100 != 2 {
		herr := transports.NewHTTPStatusError(resp)
		resp.Body.Close()
		return fail(herr)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		if mt, _, _ := mime.ParseMediaType(ct); mt != contentEventStream {
			resp.Body.Close()
			return fail(&transports.ConfigError{Err: fmt.Errorf("%s answered with Content-Type %q, not an event stream: is it a legacy SSE endpoint?", transports.SafeURL(u), ct)})
		}
	}
	er := eventstream.NewReader(resp.Body, o.MaxFrameSize)
	ep, err := c.awaitEndpoint(u, er)
	if err != nil {
		resp.Body.Close()
		return fail(err)
	}
	if !stop() { // time ran out just as the endpoint arrived
		resp.Body.Close()
		return fail(context.Cause(connCtx))
	}
	c.endpoint, c.safeEP = ep.String(), transports.SafeURL(ep)
	c.log.Debug().Str("endpoint", c.safeEP).Msg("legacy SSE endpoint received")
	routine.Go("sse.read", func() { c.read(resp.Body, er) })
	return c, nil
}

// awaitEndpoint reads events until the endpoint event and resolves it.
func (c *Conn) awaitEndpoint(base *url.URL, er *eventstream.Reader) (*url.URL, error) {
	for {
		ev, err := er.Next()
		var tooBig *transports.FrameTooLargeError
		switch {
		case errors.As(err, &tooBig):
			c.log.Debug().Int64("size_at_least", tooBig.Size).Msg("dropped an oversize event before the endpoint event")
			continue
		case err == io.EOF:
			return nil, fmt.Errorf("%w: sse: the server ended the event stream before sending the endpoint event", transports.ErrClosed)
		case err != nil:
			return nil, fmt.Errorf("sse: reading the event stream: %w", err)
		}
		if ev.Type != "endpoint" {
			c.log.Debug().Str("type", ev.Type).Msg("dropped an event before the endpoint event")
			continue
		}
		return resolveEndpoint(base, string(ev.Data))
	}
}

// resolveEndpoint resolves the endpoint event's data against the server's
// URL and checks that it stays on the same origin.
func resolveEndpoint(base *url.URL, data string) (*url.URL, error) {
	ref, err := url.Parse(strings.TrimSpace(data))
	if err != nil {
		return nil, fmt.Errorf("sse: the endpoint event is not a URI reference: %w", transports.RedactURLError(err))
	}
	ep := base.ResolveReference(ref)
	ep.Fragment, ep.RawFragment = "", ""
	if origin(ep) != origin(base) {
		return nil, &transports.ConfigError{Err: &OriginError{Server: origin(base), Endpoint: origin(ep)}}
	}
	return ep, nil
}

// origin is a URL's scheme://host:port, lower-cased, with the scheme's
// default port made explicit.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host + ":" + port
}

// read delivers the stream's message events until it ends, then reports
// Closed.
func (c *Conn) read(body io.ReadCloser, er *eventstream.Reader) {
	defer close(c.readerDone)
	var err error
	for {
		var ev eventstream.Event
		ev, err = er.Next()
		var tooBig *transports.FrameTooLargeError
		if errors.As(err, &tooBig) {
			c.recv.FrameError(tooBig)
			continue
		}
		if err != nil {
			break
		}
		switch ev.Type {
		case "", "message":
			if len(bytes.TrimSpace(ev.Data)) > 0 {
				c.recv.Frame(ev.Data)
			}
		case "endpoint":
			c.log.Debug().Msg("ignored a second endpoint event")
		default:
			c.log.Debug().Str("type", ev.Type).Msg("ignored an event of another type")
		}
	}
	body.Close()
	cause := c.cause(err)
	c.end(cause) // Send fails from now on, and POSTs in flight stop
	c.recv.Closed(cause)
}

// cause explains why the stream ended.
func (c *Conn) cause(readErr error) error {
	if by := c.endedBy(); by != nil {
		return by
	}
	if readErr == io.EOF {
		return fmt.Errorf("%w: sse: the server ended the event stream", transports.ErrClosed)
	}
	return fmt.Errorf("sse: reading the event stream: %w", readErr)
}

// end records why this side ends the connection (the first reason
// stands) and stops the stream and the POSTs in flight.
func (c *Conn) end(err error) {
	c.mu.Lock()
	if c.closedBy == nil {
		c.closedBy = err
	}
	c.mu.Unlock()
	c.cancel(err)
}

func (c *Conn) endedBy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closedBy
}

// closedErr is what Send returns once the connection has ended.
func closedErr(by error) error {
	if errors.Is(by, transports.ErrClosed) {
		return by
	}
	return fmt.Errorf("%w: %w", transports.ErrClosed, by)
}

// Send POSTs frame to the endpoint. Any 2xx status is success (the body
// is ignored); another status is a *transports.HTTPStatusError, and the
// connection stays up, except for 404 and 410, which mean the server no
// longer knows the session: the connection then ends, and the error (also
// the cause Closed reports) matches transports.ErrSessionExpired. When
// ctx ends first, Send returns its error, wrapped; whether the server
// received the frame is then unknown.
func (c *Conn) Send(ctx context.Context, frame []byte) error {
	c.mu.Lock()
	if by := c.closedBy; by != nil {
		c.mu.Unlock()
		return closedErr(by)
	}
	c.sends.Add(1)
	c.mu.Unlock()
	defer c.sends.Done()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sse: send: %w", err)
	}

	// The POST ends with ctx or with the connection, whichever is first.
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.ctx, func() { cancel(transports.ErrClosed) })
	defer stop()

	req, err := http.NewRequestWithContext(pctx, http.MethodPost, c.endpoint, bytes.NewReader(frame))
	if err != nil {
		return fmt.Errorf("sse: send: %w", err)
	}
	req.Header = c.header.Clone()
	req.Header.Set("Content-Type", contentJSON)
	resp, err := c.client.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("sse: send: %w", ctx.Err())
		case c.ctx.Err() != nil:
			return closedErr(c.endedBy())
		}
		return fmt.Errorf("sse: POST %s: %w", c.safeEP, transports.RedactURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
		return nil
	}
	herr := transports.NewHTTPStatusError(resp)
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone {
		err := fmt.Errorf("%w: sse: %w", transports.ErrSessionExpired, herr)
		c.log.Debug().Int("status", resp.StatusCode).Msg("the server no longer knows the session; ending the connection")
		c.end(err)
		return err
	}
	return herr
}

// Close ends the connection: it cancels the event stream and the POSTs in
// flight, then waits, bounded by ctx, for the reader to report Closed
// (with transports.ErrClosed) and for the POSTs to return. It is
// idempotent and safe to call concurrently with Send and with itself.
func (c *Conn) Close(ctx context.Context) error {
	c.end(transports.ErrClosed)
	c.closeOnce.Do(func() {
		go func() {
			c.sends.Wait() // no Add after end: Send checks closedBy under mu
			close(c.sendsDone)
		}()
	})
	for _, done := range []chan struct{}{c.readerDone, c.sendsDone} {
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("sse: close: the event stream's reader or a send is still running: %w", ctx.Err())
		}
	}
	if c.ownClient {
		c.client.CloseIdleConnections()
	}
	return nil
}

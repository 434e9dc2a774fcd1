// Package streamable is the Streamable HTTP transport of MCP, in both of
// its eras:
//
//   - 2025-03-26 … 2025-11-25 (sessions): every message is POSTed to the
//     server's one endpoint; the answer comes back as JSON or as an SSE
//     stream; the Mcp-Session-Id the server issues with the initialize
//     response is sent on every later request, and a 404 on it means the
//     session expired (ErrSessionExpired). A standalone GET stream carries
//     the server's own notifications; a response stream that breaks is
//     resumed with GET and Last-Event-ID after the server's retry delay.
//     Close ends the session with DELETE.
//   - 2026-07-28 (stateless): no session, no GET stream; each POST carries
//     Mcp-Method (and Mcp-Name for tools/call, resources/read and
//     prompts/get) mirrored from its body, plus the headers the session
//     layer puts in its context (transports.WithRequestHeaders: the
//     Mcp-Param-* headers of a tools/call), and notifications come on the
//     stream of a subscriptions/listen request.
//
// The session layer says which era is in use through
// transports.VersionSetter.
//
// Send is synchronous: it POSTs the frame and, for a request, reads the
// answer in the calling goroutine and delivers it to the Receiver before
// returning. A JSON answer therefore reaches its waiter with no goroutine
// hand-off at all.
package streamable

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/internal/routine"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
	"github.com/mcpvisor/mcpvisor/transports/eventstream"
	"github.com/mcpvisor/mcpvisor/transports/httpclient"
)

// Options configure a connection. The zero value is usable.
type Options struct {
	// Client sends the requests. Nil means one built by httpclient.New
	// from the server's config (TLS settings, proxy from the environment).
	Client *http.Client

	// MaxFrameSize caps one message (a JSON body or one SSE event). Zero
	// means transports.DefaultMaxFrameSize (16 MiB).
	MaxFrameSize int

	// UserAgent is sent unless the config's headers set one.
	UserAgent string

	// DisableGetStream never opens the standalone GET stream. The server's
	// own notifications are then lost in the session eras.
	DisableGetStream bool

	// MaxResumes bounds how many times in a row a broken response stream
	// is resumed (GET with Last-Event-ID) without receiving an event.
	// Zero means 3.
	MaxResumes int

	// DefaultRetry is the wait before resuming a stream whose server set
	// no retry field. Zero means 1 s.
	DefaultRetry time.Duration

	// MaxRetry caps the server's retry field and the GET stream's backoff.
	// Zero means 30 s.
	MaxRetry time.Duration

	// GetStreamAttempts bounds how many times in a row the standalone GET
	// stream is reopened without receiving an event before it is given
	// up (the POST channel is unaffected). Zero means 5.
	GetStreamAttempts int

	// GetStreamWait bounds how long sending the initialized notification
	// waits for the standalone GET stream to open, so that nothing the
	// server sends before the first request's answer is lost. Zero means
	// 2 s.
	GetStreamWait time.Duration

	// DeleteTimeout bounds the DELETE that ends the session on Close.
	// Zero means 2 s.
	DeleteTimeout time.Duration

	// EndLimiter, when set, bounds the DELETEs in flight to each host
	// across the sessions that share it (see EndLimiter); waiting for a
	// slot counts against DeleteTimeout. Nil: no bound.
	EndLimiter *EndLimiter

	// Logger receives diagnostics. The zero value logs nothing. Header
	// values are never logged.
	Logger zerolog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = transports.DefaultMaxFrameSize
	}
	if o.MaxResumes <= 0 {
		o.MaxResumes = 3
	}
	if o.DefaultRetry <= 0 {
		o.DefaultRetry = time.Second
	}
	if o.MaxRetry <= 0 {
		o.MaxRetry = 30 * time.Second
	}
	if o.GetStreamAttempts <= 0 {
		o.GetStreamAttempts = 5
	}
	if o.GetStreamWait <= 0 {
		o.GetStreamWait = 2 * time.Second
	}
	if o.DeleteTimeout <= 0 {
		o.DeleteTimeout = 2 * time.Second
	}
	return o
}

// The HTTP headers of the transport.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerLastEventID     = "Last-Event-Id"
	headerMethod          = "Mcp-Method"
	headerName            = "Mcp-Name"
	contentJSON           = "application/json"
	contentEventStream    = "text/event-stream"
	acceptPost            = contentJSON + ", " + contentEventStream
)

// Header values every POST carries, shared by all requests (read-only).
var (
	contentJSONValue = []string{contentJSON}
	acceptPostValue  = []string{acceptPost}
)

// Conn is one Streamable HTTP connection.
//
// Concurrency: Send runs in its callers' goroutines; the GET stream and
// resumptions run in goroutines the Conn owns, counted by wg and stopped
// by cancelling ctx. mu guards the session id, the version, the closed
// flag and the in-flight count.
type Conn struct {
	opts       Options
	url        string
	client     *http.Client
	ownsClient bool
	header     http.Header // the config's headers; read-only after Dial
	recv       transports.Receiver

	ctx    context.Context // ends when the connection closes
	cancel context.CancelFunc
	wg     sync.WaitGroup // Sends in flight and the GET stream

	mu        sync.Mutex
	sessionID string // guarded by mu; issued with the initialize response
	version   string // guarded by mu; the negotiated (or probed) version
	// sessionIDValue and versionValue are sessionID and version as the
	// header values every POST carries, built once (read-only once set).
	sessionIDValue, versionValue []string // guarded by mu
	modern                       bool     // guarded by mu; version is of the stateless era
	getStarted                   bool     // guarded by mu
	closed                       bool     // guarded by mu
	closeOnce                    sync.Once
}

var (
	_ transports.Conn          = (*Conn)(nil)
	_ transports.VersionSetter = (*Conn)(nil)
	_ transports.HeaderCarrier = (*Conn)(nil)
)

// Dial prepares a connection to the server at cfg.URL. Nothing is sent
// until the first Send: Streamable HTTP has no connection of its own.
func Dial(ctx context.Context, cfg transports.Config, opts Options, r transports.Receiver) (*Conn, error) {
	u, err := httpclient.ParseURL(cfg.URL, "http", "https")
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	c := &Conn{opts: opts, url: u.String(), client: opts.Client, recv: r}
	if c.client == nil {
		if c.client, err = httpclient.New(cfg, httpclient.Options{}); err != nil {
			return nil, err
		}
		c.ownsClient = true
	}
	c.header = httpclient.Header(cfg, opts.UserAgent)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// SetProtocolVersion sets the version sent in Mcp-Protocol-Version and
// chooses the era: a stateless version mirrors method and name into
// headers and never opens the GET stream.
func (c *Conn) SetProtocolVersion(version string) {
	c.mu.Lock()
	c.version = version
	c.versionValue = []string{version}
	c.modern = protocol.UsesDiscover(version)
	c.mu.Unlock()
}

// CarriesRequestHeaders implements transports.HeaderCarrier: the headers
// of transports.WithRequestHeaders go with the POSTs of the stateless era.
func (c *Conn) CarriesRequestHeaders() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.modern
}

// SessionID returns the session id the server issued, if any.
func (c *Conn) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// outgoing is what Send needs to know about a frame.
type outgoing struct {
	kind    protocol.Kind
	id      protocol.ID
	method  string
	name    string // params.name or params.uri, for the Mcp-Name header
	version string
	session string
	modern  bool
	// The header values of version and session, when the Conn has them
	// built (nil: built per request).
	versionValue, sessionValue []string
}

// Send POSTs one frame. For a request it then reads the answer (JSON, or
// an SSE stream, resumed if it breaks) and delivers it before returning.
// It returns an error matching ErrSessionExpired (and ErrClosed) when the
// server no longer knows the session, an *transports.HTTPStatusError for
// another refused POST, transports.ErrStreamBroken when the answer's
// stream (or JSON body, or, in the stateless era, the connection that
// carried the request) ended before the answer and could not be resumed,
// or the network error.
func (c *Conn) Send(ctx context.Context, frame []byte) error {
	m, err := protocol.Decode(frame)
	if err != nil {
		return fmt.Errorf("streamable: refusing to send an invalid frame: %w", err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return transports.ErrClosed
	}
	out := outgoing{kind: m.Kind, id: m.ID, method: m.Method, version: c.version, session: c.sessionID, modern: c.modern,
		versionValue: c.versionValue, sessionValue: c.sessionIDValue}
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()
	if out.modern && m.Kind == protocol.KindRequest {
		out.name = nameOf(m.Method, m.Params)
	}

	// The request ends with the caller's context or the connection.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()

	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.url, bytes.NewReader(frame))
	if err != nil {
		return &transports.ConfigError{Err: transports.RedactURLError(err)}
	}
	// A map sized for what is set here, and shared value slices for the
	// constant headers: the keys are canonical already, so Header.Set's
	// canonicalisation and its one-element slice per value are skipped.
	// Neither net/http nor httpclient modifies a request's headers.
	req.Header = make(http.Header, len(c.header)+6)
	c.setHeaders(req.Header, out)
	req.Header["Content-Type"] = contentJSONValue
	req.Header["Accept"] = acceptPostValue
	if out.modern {
		if out.method != "" {
			req.Header[headerMethod] = []string{out.method}
		}
		if out.name != "" {
			req.Header[headerName] = []string{protocol.EncodeHeaderValue(out.name)}
		}
		for _, h := range transports.RequestHeaders(ctx) {
			req.Header.Set(h.Name, h.Value)
		}
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return c.requestError(ctx, err, out)
	}
	defer resp.Body.Close()

	if sid := resp.Header.Get(headerSessionID); sid != "" && out.method == protocol.MethodInitialize && resp.StatusCode < 300 {
		c.mu.Lock()
		c.sessionID = sid
		c.sessionIDValue = []string{sid}
		c.mu.Unlock()
	}
	if resp.StatusCode >= 300 {
		if out.session != "" && sessionGone(resp) {
			err := fmt.Errorf("%w: %w", transports.ErrClosed, transports.ErrSessionExpired)
			c.closeWith(transports.ErrSessionExpired)
			return err
		}
		return c.refused(resp, out)
	}
	if out.kind != protocol.KindRequest {
		if out.method == protocol.NotificationInitialized {
			// Servers send what is not an answer (elicitation, sampling,
			// notifications) on the GET stream and drop it while there is
			// none: have it open before the first request.
			if opened := c.startGetStream(); opened != nil {
				t := time.NewTimer(c.opts.GetStreamWait)
				select {
				case <-opened:
				case <-t.C:
				case <-ctx.Done():
				}
				t.Stop()
			}
		}
		return nil // notifications and responses: 202, nothing to read
	}
	if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent {
		return nil // the answer, if any, comes on the GET stream
	}
	switch mediaType(resp.Header.Get("Content-Type")) {
	case contentEventStream:
		return c.readResponseStream(rctx, resp.Body, out)
	default:
		return c.readJSON(resp.Body, resp.ContentLength)
	}
}

// mediaType returns the media type of a Content-Type header value. The
// two values servers send (without parameters) are recognised without
// mime.ParseMediaType, which allocates a map per call.
func mediaType(v string) string {
	switch v {
	case contentJSON, contentEventStream:
		return v
	}
	t, _, _ := mime.ParseMediaType(v)
	return t
}

// setHeaders adds the config's headers and the session's.
func (c *Conn) setHeaders(h http.Header, out outgoing) {
	for k, v := range c.header {
		h[k] = v
	}
	if out.session != "" {
		if out.sessionValue == nil {
			out.sessionValue = []string{out.session}
		}
		h[headerSessionID] = out.sessionValue
	}
	if out.version != "" && out.method != protocol.MethodInitialize {
		if out.versionValue == nil {
			out.versionValue = []string{out.version}
		}
		h[headerProtocolVersion] = out.versionValue
	}
}

// requestError wraps a failed round trip, its URL without user info or
// query (transports.RedactURLError). A connection that was closed
// underneath the request says so. In the stateless era a request whose
// connection failed after it was dialled (the server may have it, but
// its answer is lost) also matches transports.ErrStreamBroken: the era
// has no resumption, and the session layer may re-issue it.
func (c *Conn) requestError(ctx context.Context, err error, out outgoing) error {
	err = transports.RedactURLError(err)
	switch {
	case c.ctx.Err() != nil:
		return transports.ErrClosed
	case ctx.Err() != nil:
		return fmt.Errorf("streamable: %w", context.Cause(ctx))
	}
	var op *net.OpError
	if out.modern && out.kind == protocol.KindRequest && !(errors.As(err, &op) && op.Op == "dial") {
		return fmt.Errorf("streamable: POST: %w: %w", transports.ErrStreamBroken, err)
	}
	return fmt.Errorf("streamable: POST: %w", err)
}

// sessionGone reports whether an error answer to a request that carried
// a session id says the server no longer knows the session: 404, as the
// spec says, or a 400 whose body is about the session id, as the
// TypeScript SDK's servers answer an unknown session. It consumes the
// body of a 400 only when it reports true.
func sessionGone(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusNotFound:
		return true
	case http.StatusBadRequest:
		head, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
		return bytes.Contains(bytes.ToLower(head), []byte("session"))
	}
	return false
}

// interrupted explains a request whose context ended: the connection
// closed, or the caller gave up.
func (c *Conn) interrupted(ctx context.Context) error {
	if c.ctx.Err() != nil {
		return transports.ErrClosed
	}
	return fmt.Errorf("streamable: %w", context.Cause(ctx))
}

// refused handles a POST answered with an error status. A JSON-RPC error
// response in the body (as stateless-era servers send with 400) is
// delivered like any answer; anything else becomes an HTTPStatusError.
func (c *Conn) refused(resp *http.Response, out outgoing) error {
	statusErr := transports.NewHTTPStatusError(resp)
	if out.kind == protocol.KindRequest && len(statusErr.Body) > 0 {
		if m, err := protocol.Decode(statusErr.Body); err == nil && m.Kind == protocol.KindResponse && m.Error != nil && m.ID == out.id {
			c.recv.Frame(statusErr.Body)
			return nil
		}
	}
	return statusErr
}

// answerBuffers hold JSON answers while they are delivered: the receiver
// copies what it keeps (transports.Receiver), so a buffer is reused by the
// next answer rather than allocated per call as io.ReadAll would.
var answerBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// retainedAnswerBuffer bounds the buffers kept for reuse, so that one big
// answer does not pin its memory.
const retainedAnswerBuffer = 64 << 10

// readJSON delivers a JSON answer. size is the Content-Length, or -1.
func (c *Conn) readJSON(body io.Reader, size int64) error {
	buf := answerBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= retainedAnswerBuffer {
			buf.Reset()
			answerBuffers.Put(buf)
		}
	}()
	limit := int64(c.opts.MaxFrameSize)
	if size > 0 && size <= limit {
		buf.Grow(int(size) + 1) // +1: the read that sees the end
	}
	_, err := buf.ReadFrom(io.LimitReader(body, limit+1))
	if err != nil {
		return fmt.Errorf("streamable: reading the answer: %w: %w", transports.ErrStreamBroken, err)
	}
	data := buf.Bytes()
	if len(data) > c.opts.MaxFrameSize {
		n, _ := io.Copy(io.Discard, body)
		prefix := bytes.Clone(data[:min(len(data), 4<<10)]) // the error outlives the buffer
		c.recv.FrameError(&transports.FrameTooLargeError{Size: int64(len(data)) + n, Limit: int64(c.opts.MaxFrameSize), Prefix: prefix})
		return nil
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	c.recv.Frame(data)
	return nil
}

// readResponseStream delivers the events of a POST's SSE answer until
// the response to out.id arrives. A stream that ends first is resumed
// with GET and Last-Event-ID (session eras), after the server's retry
// delay, at most MaxResumes times in a row without progress.
func (c *Conn) readResponseStream(ctx context.Context, body io.ReadCloser, out outgoing) error {
	er := eventstream.NewReader(body, c.opts.MaxFrameSize)
	failures := 0
	for {
		answered, progressed, err := c.deliver(er, out.id)
		if answered {
			return nil
		}
		if progressed {
			failures = 0
		}
		if ctx.Err() != nil {
			return c.interrupted(ctx)
		}
		lastID := er.LastID()
		if out.modern || lastID == "" {
			return fmt.Errorf("%w (%v)", transports.ErrStreamBroken, err)
		}
		if failures++; failures > c.opts.MaxResumes {
			return fmt.Errorf("%w after %d resumptions (%v)", transports.ErrStreamBroken, c.opts.MaxResumes, err)
		}
		if err := sleep(ctx, c.retryDelay(er)); err != nil {
			return c.interrupted(ctx)
		}
		resp, err := c.get(ctx, out, lastID)
		if err != nil {
			var status *transports.HTTPStatusError
			if errors.As(err, &status) {
				return fmt.Errorf("%w: resuming: %w", transports.ErrStreamBroken, err)
			}
			continue // a network error: try again while the budget lasts
		}
		body.Close()
		body = resp.Body
		defer body.Close()
		retry, hasRetry := er.Retry()
		er = eventstream.NewReader(body, c.opts.MaxFrameSize)
		er.Resume(lastID, retry, hasRetry)
	}
}

// deliver hands the stream's messages to the receiver until the response
// to id (answered), the end of the stream or an error. progressed reports
// whether any event arrived.
func (c *Conn) deliver(er *eventstream.Reader, id protocol.ID) (answered, progressed bool, err error) {
	for {
		ev, err := er.Next()
		if err != nil {
			var tooBig *transports.FrameTooLargeError
			if errors.As(err, &tooBig) {
				progressed = true
				c.recv.FrameError(tooBig)
				if found, ok := protocol.FindID(tooBig.Prefix); ok && found == id {
					return true, true, nil // the answer was dropped: the receiver failed the call
				}
				continue
			}
			return false, progressed, err
		}
		progressed = true
		if (ev.Type != "" && ev.Type != "message") || len(bytes.TrimSpace(ev.Data)) == 0 {
			continue // a priming event, or an event type MCP does not use
		}
		isAnswer := idOf(ev.Data) == id
		c.recv.Frame(ev.Data)
		if isAnswer {
			return true, true, nil
		}
	}
}

// idOf returns the id of a response frame, or the zero ID.
func idOf(frame []byte) protocol.ID {
	m, err := protocol.Decode(frame)
	if err != nil || m.Kind != protocol.KindResponse {
		return protocol.ID{}
	}
	return m.ID
}

func (c *Conn) retryDelay(er *eventstream.Reader) time.Duration {
	d, ok := er.Retry()
	if !ok {
		d = c.opts.DefaultRetry
	}
	return min(d, c.opts.MaxRetry)
}

// get opens a GET stream (the standalone one, or a resumption).
func (c *Conn) get(ctx context.Context, out outgoing, lastEventID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, transports.RedactURLError(err)
	}
	c.setHeaders(req.Header, out)
	req.Header.Set("Accept", contentEventStream)
	if lastEventID != "" {
		req.Header.Set(headerLastEventID, lastEventID)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, transports.RedactURLError(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, transports.NewHTTPStatusError(resp)
	}
	if ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ctype != contentEventStream {
		resp.Body.Close()
		return nil, fmt.Errorf("streamable: GET answered %q, not an event stream", ctype)
	}
	return resp, nil
}

// startGetStream opens the standalone GET stream once, after the
// initialized notification, in the session eras. The channel it returns
// is closed when the server answered the first GET (or it failed); nil
// means no stream is opened.
func (c *Conn) startGetStream() <-chan struct{} {
	c.mu.Lock()
	if c.getStarted || c.closed || c.modern || c.opts.DisableGetStream {
		c.mu.Unlock()
		return nil
	}
	c.getStarted = true
	out := outgoing{session: c.sessionID, version: c.version}
	c.wg.Add(1)
	c.mu.Unlock()
	opened := make(chan struct{})
	routine.Go("streamable.get-stream", func() {
		defer c.wg.Done()
		c.runGetStream(out, opened)
	})
	return opened
}

// runGetStream keeps the standalone GET stream open: it delivers the
// server's messages and reopens the stream when it ends, resuming after
// the last event id, with backoff. A server that does not offer the
// stream (405, or 404/400 as some do) is left alone; repeated failures
// without an event give up. Either way the POST channel is unaffected —
// except when a stream that was open is refused with 404 (or a 400 about
// the session) on reopening: the server restarted and forgot the session,
// and the connection ends with ErrSessionExpired at once.
func (c *Conn) runGetStream(out outgoing, opened chan struct{}) {
	defer func() {
		select {
		case <-opened:
		default:
			close(opened)
		}
	}()
	ctx := c.ctx
	lastID := ""
	var retry time.Duration
	hasRetry := false
	failures := 0
	everOpened := false
	backoff := c.opts.DefaultRetry
	for ctx.Err() == nil {
		resp, err := c.get(ctx, out, lastID)
		select {
		case <-opened:
		default:
			close(opened)
		}
		if err != nil {
			var status *transports.HTTPStatusError
			if errors.As(err, &status) && status.StatusCode < 500 && status.StatusCode != http.StatusTooManyRequests {
				if everOpened && out.session != "" && (status.StatusCode == http.StatusNotFound ||
					status.StatusCode == http.StatusBadRequest && bytes.Contains(bytes.ToLower(status.Body), []byte("session"))) {
					// The stream was open before: the server forgot the
					// session (it restarted). Say so now, not at the next call.
					c.closeWith(transports.ErrSessionExpired)
					return
				}
				c.opts.Logger.Debug().Int("status", status.StatusCode).Msg("the server offers no standalone GET stream")
				return
			}
			if ctx.Err() != nil {
				return
			}
			c.opts.Logger.Debug().Err(err).Msg("standalone GET stream failed")
		} else {
			everOpened = true
			er := eventstream.NewReader(resp.Body, c.opts.MaxFrameSize)
			er.Resume(lastID, retry, hasRetry)
			_, progressed, err := c.deliver(er, protocol.ID{})
			resp.Body.Close()
			lastID = er.LastID()
			retry, hasRetry = er.Retry()
			if progressed {
				failures = 0
				backoff = c.opts.DefaultRetry
			}
			if ctx.Err() != nil {
				return
			}
			c.opts.Logger.Debug().Err(err).Bool("progressed", progressed).Msg("standalone GET stream ended; reopening")
		}
		if failures++; failures > c.opts.GetStreamAttempts {
			c.opts.Logger.Warn().Int("attempts", failures-1).Msg("giving up the standalone GET stream; server notifications are lost until the next connection")
			return
		}
		wait := backoff
		if hasRetry {
			wait = retry
		}
		if sleep(ctx, min(wait, c.opts.MaxRetry)) != nil {
			return
		}
		backoff = min(backoff*2, c.opts.MaxRetry)
	}
}

// Close ends the session with DELETE (bounded by DeleteTimeout and ctx),
// stops the GET stream and in-flight requests, and reports Closed.
func (c *Conn) Close(ctx context.Context) error {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	sid, version := c.sessionID, c.version
	c.mu.Unlock()
	if !already && sid != "" {
		c.deleteSession(ctx, sid, version)
	}
	c.closeWith(transports.ErrClosed)
	waited := make(chan struct{})
	go func() { c.wg.Wait(); close(waited) }()
	select {
	case <-waited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("streamable: close: requests still in flight: %w", ctx.Err())
	}
}

// closeWith ends the connection once, reporting cause.
func (c *Conn) closeWith(cause error) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.cancel()
		if c.ownsClient {
			c.client.CloseIdleConnections()
		}
		c.recv.Closed(cause)
	})
}

// deleteSession tells the server the session is over. A server that does
// not allow it (405) or already forgot it is fine.
func (c *Conn) deleteSession(ctx context.Context, sid, version string) {
	dctx, cancel := context.WithTimeout(ctx, c.opts.DeleteTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(dctx, http.MethodDelete, c.url, nil)
	if err != nil {
		return
	}
	release, ok := c.opts.EndLimiter.acquire(dctx, req.URL.Host)
	if !ok {
		c.opts.Logger.Debug().Msg("DELETE of the session skipped: no slot before its deadline")
		return
	}
	defer release()
	c.setHeaders(req.Header, outgoing{session: sid, version: version})
	resp, err := c.client.Do(req)
	if err != nil {
		c.opts.Logger.Debug().Err(transports.RedactURLError(err)).Msg("DELETE of the session failed")
		return
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
}

// nameOf returns what Mcp-Name mirrors: params.name of tools/call and
// prompts/get, params.uri of resources/read.
func nameOf(method string, params json.RawMessage) string {
	key := "name"
	switch method {
	case protocol.MethodToolsCall, protocol.MethodPromptsGet:
	case protocol.MethodResourcesRead:
		key = "uri"
	default:
		return ""
	}
	if v, ok := protocol.PlainStringMember(params, key); ok {
		return v // the usual case, without encoding/json's reflection
	}
	var p struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	if key == "uri" {
		return p.URI
	}
	return p.Name
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

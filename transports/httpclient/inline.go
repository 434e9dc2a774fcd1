package httpclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// inlineTransport is the http.RoundTripper of every client New builds. A
// plain-HTTP request that goes to its host directly (no proxy) and asks
// for no protocol upgrade is exchanged in the caller's goroutine: the
// request is written and the response headers are read on a pooled
// keep-alive HTTP/1.1 connection, and the body is read from that
// connection by whoever reads the response. Every other request (https,
// proxied, WebSocket upgrades) goes to fallback, a standard
// *http.Transport.
//
// Why: net/http's transport hands every request to a writer goroutine and
// every response from a reader goroutine of the connection. A sequential
// MCP call pays both hand-offs (about a third of a loopback round trip),
// and every idle connection holds both goroutines and two 4 KiB buffers.
// Here an idle event stream costs the one goroutine reading it and one
// read buffer; write buffers are pooled.
//
// Requests are never retried: a POST written to a connection the server
// had closed fails, as with net/http (a tool call is never sent twice).
// To make that rare, a connection is checked for a close from the server
// before it is reused.
type inlineTransport struct {
	fallback              *http.Transport
	proxy                 func(*http.Request) (*url.URL, error)
	dial                  func(ctx context.Context, network, addr string) (net.Conn, error)
	responseHeaderTimeout time.Duration // zero: none
	maxInFlight           int           // per host; zero: unlimited
	maxIdle               int           // idle connections kept per host
	idleTimeout           time.Duration // an idle connection is closed after this

	mu    sync.Mutex
	hosts map[string]*inlineHost // by host:port; guarded by mu
}

// inlineHost is the state of one host:port.
type inlineHost struct {
	// direct says requests go to the host without a proxy; decided once,
	// when the host is first seen (the environment's proxy settings are
	// read once per process anyway).
	direct bool
	// inFlight holds one token per exchange in progress (from the request
	// until its body is finished); nil when unlimited.
	inFlight chan struct{}
	// idle are the connections ready for reuse, most recently used last.
	// Guarded by inlineTransport.mu.
	idle []*inlineConn
}

// inlineConn is one keep-alive connection. It is used by one exchange at a
// time: while idle it belongs to the pool, otherwise to the exchange
// (request writer, then body reader) that took it.
type inlineConn struct {
	t    *inlineTransport
	host *inlineHost
	nc   net.Conn
	br   *bufio.Reader

	// idleTimer closes the connection once it has been idle for
	// t.idleTimeout; created on the first return to the pool.
	idleTimer *time.Timer
}

// writeBuffers are the buffers requests are written through: a connection
// needs one only while it writes, so an idle event stream holds none.
var writeBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}

// aLongTimeAgo is a deadline in the past: setting it makes blocked reads
// and writes on a connection return at once.
var aLongTimeAgo = time.Unix(1, 0)

// RoundTrip implements http.RoundTripper.
func (t *inlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" || req.Header.Get("Upgrade") != "" {
		return t.fallback.RoundTrip(req)
	}
	addr := hostPort(req.URL)
	h, err := t.host(req, addr)
	if err != nil {
		closeRequestBody(req)
		return nil, err
	}
	if !h.direct {
		return t.fallback.RoundTrip(req)
	}
	ctx := req.Context()
	if h.inFlight != nil {
		select {
		case h.inFlight <- struct{}{}:
		case <-ctx.Done():
			closeRequestBody(req)
			return nil, ctx.Err()
		}
	}
	pc, err := t.conn(ctx, h, addr)
	if err != nil {
		h.release()
		closeRequestBody(req)
		return nil, err
	}
	return pc.exchange(ctx, req)
}

// host returns the state of addr, creating it on first use.
func (t *inlineTransport) host(req *http.Request, addr string) (*inlineHost, error) {
	t.mu.Lock()
	h := t.hosts[addr]
	t.mu.Unlock()
	if h != nil {
		return h, nil
	}
	proxyURL, err := t.proxy(req)
	if err != nil {
		return nil, fmt.Errorf("choosing a proxy: %w", err)
	}
	h = &inlineHost{direct: proxyURL == nil}
	if t.maxInFlight > 0 {
		h.inFlight = make(chan struct{}, t.maxInFlight)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if prev := t.hosts[addr]; prev != nil {
		return prev, nil
	}
	t.hosts[addr] = h
	return h, nil
}

// release frees the in-flight token of one finished exchange.
func (h *inlineHost) release() {
	if h.inFlight != nil {
		<-h.inFlight
	}
}

// conn returns an idle connection to the host that is still open, or
// dials a new one.
func (t *inlineTransport) conn(ctx context.Context, h *inlineHost, addr string) (*inlineConn, error) {
	for {
		t.mu.Lock()
		n := len(h.idle)
		if n == 0 {
			t.mu.Unlock()
			break
		}
		pc := h.idle[n-1]
		h.idle[n-1] = nil
		h.idle = h.idle[:n-1]
		t.mu.Unlock()
		pc.idleTimer.Stop()
		if pc.br.Buffered() == 0 && peerOpen(pc.nc) {
			return pc, nil
		}
		pc.nc.Close()
	}
	nc, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &inlineConn{t: t, host: h, nc: nc, br: bufio.NewReaderSize(nc, 4<<10)}, nil
}

// exchange writes req and reads the response headers. The returned body
// finishes the exchange: at its end the connection goes back to the pool,
// on an early Close or an error it is closed. On error the connection is
// closed and the exchange finished.
func (pc *inlineConn) exchange(ctx context.Context, req *http.Request) (*http.Response, error) {
	stop := func() bool { return true }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { pc.nc.SetDeadline(aLongTimeAgo) })
	}
	fail := func(err error) (*http.Response, error) {
		stop()
		pc.close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, err
	}

	bw := writeBuffers.Get().(*bufio.Writer)
	bw.Reset(pc.nc)
	err := writeRequest(bw, req)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	writeBuffers.Put(bw)
	if err != nil {
		return fail(err)
	}

	if d := pc.t.responseHeaderTimeout; d > 0 {
		pc.nc.SetReadDeadline(time.Now().Add(d))
	}
	var resp *http.Response
	for {
		resp, err = readResponse(pc.br, req)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil {
				err = &responseHeaderTimeoutError{pc.t.responseHeaderTimeout}
			}
			return fail(err)
		}
		// 1xx responses (103 Early Hints, 100 Continue) precede the
		// final one and carry no body. 101 is not expected: upgrades go
		// to the fallback transport.
		if resp.StatusCode < 100 || resp.StatusCode >= 200 {
			break
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return fail(errors.New("unexpected 101 Switching Protocols"))
		}
	}
	if pc.t.responseHeaderTimeout > 0 {
		pc.nc.SetReadDeadline(time.Time{})
		if ctx.Err() != nil { // the cancellation's deadline may have just been cleared
			pc.nc.SetReadDeadline(aLongTimeAgo)
		}
	}

	body := &inlineBody{rc: resp.Body, pc: pc, ctx: ctx, stop: stop, reusable: !resp.Close && !req.Close}
	if resp.Body == http.NoBody {
		body.finish(true)
		return resp, nil
	}
	resp.Body = body
	return resp, nil
}

// close closes the connection and finishes its exchange.
func (pc *inlineConn) close() {
	pc.nc.Close()
	pc.host.release()
}

// reuse finishes the connection's exchange and puts it back in the pool,
// or closes it when the pool is full or the connection holds unexpected
// bytes.
func (pc *inlineConn) reuse() {
	t, h := pc.t, pc.host
	if pc.br.Buffered() > 0 {
		pc.close()
		return
	}
	t.mu.Lock()
	if len(h.idle) >= t.maxIdle {
		t.mu.Unlock()
		pc.close()
		return
	}
	// Armed before the connection is in the pool, where another exchange
	// may take it (and stop the timer) at once.
	if pc.idleTimer == nil {
		pc.idleTimer = time.AfterFunc(t.idleTimeout, pc.expire)
	} else {
		pc.idleTimer.Reset(t.idleTimeout)
	}
	h.idle = append(h.idle, pc)
	t.mu.Unlock()
	h.release()
}

// expire closes the connection if it is still idle (its timer fired).
func (pc *inlineConn) expire() {
	t, h := pc.t, pc.host
	t.mu.Lock()
	i := slices.Index(h.idle, pc)
	if i >= 0 {
		h.idle = slices.Delete(h.idle, i, i+1)
	}
	t.mu.Unlock()
	if i >= 0 {
		pc.nc.Close()
	}
}

// CloseIdleConnections closes every pooled connection, here and in the
// fallback transport.
func (t *inlineTransport) CloseIdleConnections() {
	t.mu.Lock()
	var idle []*inlineConn
	for _, h := range t.hosts {
		idle = append(idle, h.idle...)
		h.idle = nil
	}
	t.mu.Unlock()
	for _, pc := range idle {
		if pc.idleTimer != nil {
			pc.idleTimer.Stop()
		}
		pc.nc.Close()
	}
	t.fallback.CloseIdleConnections()
}

// inlineBody is the body of a response read on an inlineConn. It may be
// closed from another goroutine while a Read is blocked.
type inlineBody struct {
	rc       io.ReadCloser // the body as http.ReadResponse framed it
	pc       *inlineConn
	ctx      context.Context
	stop     func() bool // stops the context's hook on the connection
	reusable bool        // the connection may carry another request after this body

	finished atomic.Bool
	closed   atomic.Bool
}

func (b *inlineBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.finished.Load() {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.finish(b.reusable)
	case err != nil:
		b.finish(false)
		if ctxErr := b.ctx.Err(); ctxErr != nil {
			err = ctxErr
		} else if b.closed.Load() {
			err = http.ErrBodyReadAfterClose
		}
	}
	return n, err
}

// Close ends the exchange. A body not read to its end closes the
// connection, which also ends a Read blocked in another goroutine.
func (b *inlineBody) Close() error {
	b.closed.Store(true)
	b.finish(false)
	return nil
}

// finish ends the exchange once: the connection is reused if keep says so
// and the context's hook has not fired, closed otherwise.
func (b *inlineBody) finish(keep bool) {
	if !b.finished.CompareAndSwap(false, true) {
		return
	}
	if b.stop() && keep {
		b.pc.reuse()
		return
	}
	b.pc.close()
}

// responseHeaderTimeoutError is a response whose headers did not arrive
// within Options.ResponseHeaderTimeout.
type responseHeaderTimeoutError struct{ d time.Duration }

func (e *responseHeaderTimeoutError) Error() string {
	return fmt.Sprintf("no response headers within %v", e.d)
}

// Timeout reports true: the error is a timeout (net.Error).
func (e *responseHeaderTimeoutError) Timeout() bool { return true }

// Temporary reports false (net.Error).
func (e *responseHeaderTimeoutError) Temporary() bool { return false }

// hostPort is the dial address of u: its host with the scheme's default
// port when u names none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// closeRequestBody closes a request body RoundTrip will not send, as the
// http.RoundTripper contract asks.
func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

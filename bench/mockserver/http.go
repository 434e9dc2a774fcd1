package mockserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/mcpserver"
)

// HTTP header names of the Streamable HTTP transport.
const (
	headerSessionID       = mcpserver.HeaderSessionID
	headerProtocolVersion = mcpserver.HeaderProtocolVersion
	headerMethod          = mcpserver.HeaderMethod // 2026-07-28 (SEP-2243)
	headerName            = mcpserver.HeaderName   // 2026-07-28 (SEP-2243): tools/call, resources/read, prompts/get
	headerLastEventID     = mcpserver.HeaderLastEventID
)

// NewHandler returns the HTTP handler of a mock server with options o,
// which serves the endpoints of o.Transport ("" is TransportHTTP):
//
//   - TransportHTTP: Streamable HTTP at /mcp. POST, GET (the standalone
//     stream, and resumption with Last-Event-ID) and DELETE with
//     Mcp-Session-Id for 2025-03-26 … 2025-11-25; stateless POSTs for
//     2026-07-28, including subscriptions/listen.
//   - TransportSSE: HTTP+SSE (2024-11-05): GET /sse opens a session whose
//     first event is the endpoint /message?sessionId=…; POST there.
//   - TransportWS: WebSocket at /ws, subprotocol "mcp" only, one text
//     message per JSON-RPC message.
//
// Every other path is 404; with HTTP401 every request, whatever its path,
// is 401. The handler keeps its sessions in memory for its whole life.
// When an exit fault fires (ExitAfter, CrashMidResponse) the handler stops
// for good: every later request is aborted (http.ErrAbortHandler).
// Process-level options (ExitAtStart, IgnoreSIGTERM, Grandchild, Listen)
// and flapping (FlapUp, FlapDown: Serve's business) do not concern it.
//
// The handler is also an io.Closer. Its Close ends the event streams it
// holds open (standalone GET, legacy SSE and subscriptions/listen
// streams; a listen stream with a complete result), closes its WebSockets
// and answers later requests with 503; call it before closing an
// httptest.Server, which waits for every open response.
func NewHandler(o Options) (http.Handler, error) {
	h, err := newHandler(o)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// Close implements io.Closer for NewHandler's users; see there.
func (h *handler) Close() error {
	h.shutdown()
	return nil
}

// handler serves the HTTP transports: Streamable HTTP is mcpserver's,
// behind the faults of the HTTP layer; the legacy HTTP+SSE transport and
// WebSocket are the mock's own connections, served by mcpserver.ServeConn.
//
// Concurrency: every request runs on its own goroutine; mu guards the
// tables of connections and shut.
type handler struct {
	s         *server
	o         Options
	transport string
	mcp       http.Handler // the Streamable HTTP endpoint

	closing chan struct{}  // closed by shutdown
	conns   sync.WaitGroup // WebSocket and legacy connections being served

	mu     sync.Mutex
	legacy map[string]*legacyConn // guarded by mu: legacy sessions by id
	ws     map[*wsConn]struct{}   // guarded by mu: open WebSockets
	period uint64                 // guarded by mu: up periods ended (resets), so a WebSocket upgraded in one that ended is cut
	shut   bool                   // guarded by mu: shutdown was called
}

func newHandler(o Options) (*handler, error) {
	t := o.Transport
	if t == "" {
		t = TransportHTTP
	}
	switch t {
	case TransportHTTP, TransportSSE, TransportWS:
	default:
		return nil, fmt.Errorf("mockserver: transport %q is not served over HTTP", o.Transport)
	}
	o.Transport = t
	s := newServer(o)
	return &handler{
		s: s, o: o, transport: t, mcp: s.srv.HTTPHandler(),
		closing: make(chan struct{}), legacy: map[string]*legacyConn{}, ws: map[*wsConn]struct{}{},
	}, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.o.FirstByteDelay > 0 {
		w = &delayedWriter{ResponseWriter: w, ctx: r.Context(), d: h.o.FirstByteDelay}
	}
	select {
	case <-h.s.dead:
		panic(http.ErrAbortHandler)
	case <-h.closing:
		w.Header().Set("Connection", "close")
		http.Error(w, "mockserver: shutting down", http.StatusServiceUnavailable)
		return
	default:
	}
	if h.o.HTTP401 {
		unauthorized(w, r)
		return
	}
	if h.o.Silent {
		h.hang(r.Context())
		return
	}
	switch {
	case h.transport == TransportHTTP && (r.URL.Path == "/mcp" || strings.HasPrefix(r.URL.Path, "/mcp/")):
		// /mcp/<anything> are virtual servers: the same tools under as
		// many URLs as a client wants (a fleet of remote servers served
		// by one process).
		if r.Method == http.MethodPost && h.s.faults.takeBurst() {
			http.Error(w, "mockserver: injected 503", http.StatusServiceUnavailable)
			return
		}
		h.mcp.ServeHTTP(w, r)
		h.abortIfDead()
	case h.transport == TransportSSE && r.URL.Path == "/sse":
		if r.Method != http.MethodGet {
			notAllowed(w, "GET")
			return
		}
		h.legacyStream(w, r)
	case h.transport == TransportSSE && r.URL.Path == "/message":
		if r.Method != http.MethodPost {
			notAllowed(w, "POST")
			return
		}
		h.legacyPost(w, r)
	case h.transport == TransportWS && r.URL.Path == "/ws":
		h.serveWS(w, r)
	default:
		http.NotFound(w, r)
	}
}

// unauthorized answers as a server that needs an OAuth token (HTTP401):
// 401, the Bearer challenge pointing at the protected resource metadata
// (RFC 9728 §5.1), and a JSON body.
func unauthorized(w http.ResponseWriter, r *http.Request) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	metadata := scheme + "://" + r.Host + "/.well-known/oauth-protected-resource"
	w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+metadata+`", error="invalid_token"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = io.WriteString(w, `{"error":"invalid_token","error_description":"mockserver: authorization required (-http-401)"}`+"\n")
}

// hang answers nothing until the client or the server goes away.
func (h *handler) hang(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-h.closing:
		panic(http.ErrAbortHandler)
	case <-h.s.dead:
		panic(http.ErrAbortHandler)
	}
}

// abortIfDead aborts the response when an exit fault has fired.
func (h *handler) abortIfDead() {
	select {
	case <-h.s.dead:
		panic(http.ErrAbortHandler)
	default:
	}
}

// shutdown ends every standalone, legacy and listen stream (listen streams
// with their graceful end, a complete result) and refuses new requests.
// POSTs in flight finish.
func (h *handler) shutdown() {
	h.mu.Lock()
	if h.shut {
		h.mu.Unlock()
		return
	}
	h.shut = true
	close(h.closing)
	legacy := make([]*legacyConn, 0, len(h.legacy))
	for _, c := range h.legacy {
		legacy = append(legacy, c)
	}
	h.mu.Unlock()
	h.s.srv.Shutdown()
	for _, c := range legacy {
		_ = c.Close()
	}
}

// reset ends everything a server that goes down (FlapUp) loses, once
// its listener and its HTTP connections are closed: the sessions are
// forgotten (later requests in them get 404), their streams and the
// subscriptions/listen streams end without a word, and the WebSockets
// (which the http.Server no longer tracks) close at once.
func (h *handler) reset() {
	h.mu.Lock()
	h.period++
	legacy := make([]*legacyConn, 0, len(h.legacy))
	for id, c := range h.legacy {
		legacy = append(legacy, c)
		delete(h.legacy, id)
	}
	ws := make([]*wsConn, 0, len(h.ws))
	for c := range h.ws {
		ws = append(ws, c)
	}
	h.mu.Unlock()
	h.s.srv.DropSessions()
	for _, c := range legacy {
		c.cut()
	}
	for _, c := range ws {
		c.c.CloseNow()
	}
}

// track counts a connection in, unless the handler shut down; the caller
// calls the returned function when the connection ends. period is the
// current up period (see reset).
func (h *handler) track() (done func(), period uint64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.shut {
		return nil, 0, false
	}
	h.conns.Add(1)
	return h.conns.Done, h.period, true
}

func notAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	http.Error(w, "mockserver: method not allowed", http.StatusMethodNotAllowed)
}

// delayedWriter implements FirstByteDelay: it waits before the status line.
// It is used by the handler's goroutine only.
type delayedWriter struct {
	http.ResponseWriter
	ctx    context.Context
	d      time.Duration
	waited bool
}

func (d *delayedWriter) wait() {
	if d.waited {
		return
	}
	d.waited = true
	t := time.NewTimer(d.d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-d.ctx.Done():
	}
}

func (d *delayedWriter) WriteHeader(status int) {
	d.wait()
	d.ResponseWriter.WriteHeader(status)
}

func (d *delayedWriter) Write(b []byte) (int, error) {
	d.wait()
	return d.ResponseWriter.Write(b)
}

// FlushError is what http.ResponseController.Flush calls.
func (d *delayedWriter) FlushError() error {
	d.wait()
	return http.NewResponseController(d.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController (and the WebSocket upgrade) reach
// the connection.
func (d *delayedWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

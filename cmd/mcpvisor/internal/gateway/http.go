package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// MCPPath is where the MCP endpoint is served.
const MCPPath = "/mcp"

// maxBody bounds a POSTed message.
const maxBody = 16 << 20

// Handler returns the HTTP handler: the MCP endpoint at /mcp (POST, GET,
// DELETE), the admin API (GET /status, /metrics, /events) and the
// dashboard (/, /ui/, /admin/…, /login, /logout), all behind the security
// checks (see guard).
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(MCPPath, g.serveMCP)
	mux.HandleFunc("GET /status", g.serveStatus)
	mux.HandleFunc("GET /metrics", g.serveMetrics)
	mux.HandleFunc("GET /events", g.serveEvents)
	g.dash.routes(mux)
	return g.guard(mux)
}

// guard enforces the HTTP security rules before any handler:
//   - DNS rebinding: when Options.LocalOnly is set (the listener is on
//     loopback), the Host header must name a loopback host; and an Origin
//     header, when present, must be a loopback origin or one of
//     Options.AllowedOrigins. Either failure is 403.
//   - Options.Token: every request must carry "Authorization: Bearer
//     <token>" (401 with WWW-Authenticate otherwise); the dashboard's
//     login cookie stands for it outside /mcp, and the dashboard's page
//     and token form need neither (see admitted).
func (g *Gateway) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.opts.LocalOnly && !loopbackHost(r.Host) {
			g.metrics.rejected.Add(1)
			httpError(w, http.StatusForbidden, "forbidden: Host "+strconv.Quote(r.Host)+" is not a loopback host")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !g.originAllowed(o) {
			g.metrics.rejected.Add(1)
			httpError(w, http.StatusForbidden, "forbidden: Origin "+strconv.Quote(o)+" is not allowed")
			return
		}
		if g.opts.Token != "" {
			if !g.admitted(r) { // the bearer token, or the dashboard's login cookie (dashboard_auth.go)
				g.metrics.rejected.Add(1)
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcpvisor"`)
				httpError(w, http.StatusUnauthorized, "unauthorized: a bearer token is required")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names this machine's
// loopback interface.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (g *Gateway) originAllowed(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if loopbackHost(u.Host) {
		return true
	}
	for _, o := range g.opts.AllowedOrigins {
		if strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

// rpcHTTPError answers with a JSON-RPC error body and an HTTP status.
func rpcHTTPError(w http.ResponseWriter, status int, id protocol.ID, e *protocol.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(reply(id, nil, e))
}

func (g *Gateway) serveMCP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		g.servePost(w, r)
	case http.MethodGet:
		g.serveGet(w, r)
	case http.MethodDelete:
		g.serveDelete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		httpError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

const sessionHeader = mcpserver.HeaderSessionID

func (g *Gateway) lookup(id string) *session {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sessions[id]
}

func (g *Gateway) servePost(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		httpError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	if len(body) > maxBody {
		rpcHTTPError(w, http.StatusRequestEntityTooLarge, protocol.ID{}, errorf(protocol.CodeInvalidRequest, "message larger than %d bytes", maxBody))
		return
	}
	m, err := protocol.Decode(body)
	if err != nil {
		code := int64(protocol.CodeParseError)
		if errors.Is(err, protocol.ErrBatch) || errors.Is(err, protocol.ErrInvalidMessage) {
			code = protocol.CodeInvalidRequest
		}
		rpcHTTPError(w, http.StatusBadRequest, protocol.ID{}, errorf(code, "%v", err))
		return
	}
	if v := strings.TrimSpace(r.Header.Get("Mcp-Protocol-Version")); v != "" && !protocol.IsSupported(v) {
		rpcHTTPError(w, http.StatusBadRequest, m.ID, unsupportedVersion(v))
		return
	}
	sid := r.Header.Get(sessionHeader)
	var s *session
	stateless := false
	switch {
	case sid != "":
		if s = g.lookup(sid); s == nil {
			rpcHTTPError(w, http.StatusNotFound, m.ID, errorf(protocol.CodeInvalidRequest, "session not found: initialize a new one"))
			return
		}
	case m.Kind == protocol.KindRequest && isStateless(r, m):
		// A request of the stateless era: validated whole (its _meta and
		// its headers) before it is served.
		sr, perr := g.checkStateless(r.Header, m)
		if perr != nil {
			rpcHTTPError(w, http.StatusBadRequest, m.ID, perr)
			return
		}
		s = newStatelessSession(g, sr)
		stateless = true
	case m.Kind == protocol.KindRequest && m.Method == protocol.MethodInitialize:
		out := newOutbox(g.opts.OutboxSize)
		s = newSession(g, newSessionID(), out.push)
		s.out = out
	default:
		// No session and no stateless-era _meta: a handshake-era client
		// that lost its session id (or a notification).
		s = newSession(g, "", nil)
		stateless = true
	}
	if m.Kind != protocol.KindRequest {
		s.handle(r.Context(), m, nil)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	st := &reqStream{w: w, sse: acceptsSSE(r)}
	if m.Method == protocol.MethodSubscriptionsListen {
		if !st.sse {
			rpcHTTPError(w, http.StatusNotAcceptable, m.ID, errorf(protocol.CodeInvalidRequest, "subscriptions/listen needs Accept: text/event-stream"))
			return
		}
		st.start()
	}
	if g.polled(s, m, st) {
		g.servePolled(r, s, m, st)
		return
	}
	frame, code := s.handle(r.Context(), m, st.notify)
	if s.id != "" && m.Method == protocol.MethodInitialize && frame != nil && code == 0 {
		g.admitSession(s)
		w.Header().Set(sessionHeader, s.id)
	}
	status := http.StatusOK
	switch {
	case stateless && frame != nil && s.stateless != nil:
		status = mcpserver.StatelessStatus(code)
	case stateless && frame != nil && (code == protocol.CodeInvalidRequest || code == protocol.CodeUnsupportedProtocolVersion):
		status = http.StatusBadRequest
	}
	st.finish(frame, status)
}

func acceptsSSE(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(v, "text/event-stream") || strings.Contains(v, "*/*") {
			return true
		}
	}
	return false
}

// reqStream is the answer to one POSTed request: plain JSON, unless a
// notification belonging to the request comes first (and the client
// accepts SSE), which turns it into an event stream.
type reqStream struct {
	mu       sync.Mutex
	w        http.ResponseWriter
	sse      bool        // the client accepts text/event-stream
	started  bool        // the event stream's headers are written; guarded by mu
	done     bool        // the handler returned, or the stream was polled; guarded by mu
	answered bool        // a polled call answered before its poll; guarded by mu
	polling  *pollStream // where a polled call's messages go; guarded by mu
	bound    int         // the events polling keeps; guarded by mu
}

func (st *reqStream) start() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.startLocked()
}

func (st *reqStream) startLocked() {
	if st.started {
		return
	}
	st.started = true
	h := st.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	st.w.WriteHeader(http.StatusOK)
	flush(st.w)
}

// notify writes a notification onto the request's stream.
func (st *reqStream) notify(frame []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.polling != nil {
		st.polling.push(frame, false, st.bound)
		return
	}
	if st.done || !st.sse {
		return
	}
	st.startLocked()
	writeEvent(st.w, "", frame)
	flush(st.w)
}

// finish writes the answer; after it, notify does nothing.
func (st *reqStream) finish(frame []byte, status int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.polling != nil {
		return // the response ended with the poll
	}
	st.done = true
	switch {
	case frame == nil && st.started:
	case frame == nil:
		st.w.WriteHeader(http.StatusAccepted) // a cancelled request: nothing to say
	case st.started:
		writeEvent(st.w, "", frame)
		flush(st.w)
	default:
		st.w.Header().Set("Content-Type", "application/json")
		st.w.Header().Set("Content-Length", strconv.Itoa(len(frame)))
		st.w.WriteHeader(status)
		_, _ = st.w.Write(frame)
	}
}

func writeEvent(w io.Writer, id string, data []byte) {
	var b bytes.Buffer
	b.Grow(len(data) + 32)
	if id != "" {
		b.WriteString("id: ")
		b.WriteString(id)
		b.WriteByte('\n')
	}
	b.WriteString("event: message\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	_, _ = w.Write(b.Bytes())
}

func flush(w http.ResponseWriter) {
	_ = http.NewResponseController(w).Flush()
}

// serveGet is a session's standalone stream: its notifications, numbered,
// resumable with Last-Event-ID.
func (g *Gateway) serveGet(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(sessionHeader)
	if sid == "" {
		httpError(w, http.StatusMethodNotAllowed, "GET needs an Mcp-Session-Id (the stateless era has no GET stream)")
		return
	}
	s := g.lookup(sid)
	if s == nil || s.out == nil {
		httpError(w, http.StatusNotFound, "session not found")
		return
	}
	if !acceptsSSE(r) {
		httpError(w, http.StatusNotAcceptable, "GET needs Accept: text/event-stream")
		return
	}
	if !s.openStream(g.opts.MaxStreamsPerSession) {
		g.refuseStream(w)
		return
	}
	defer s.closeStream()
	if n, i, ok := parsePollEventID(r.Header.Get("Last-Event-ID")); ok {
		g.servePollResume(w, r, s, n, i)
		return
	}
	var after uint64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		after, _ = strconv.ParseUint(v, 10, 64)
	} else {
		_, first, _, _ := s.out.since(^uint64(0))
		after = first - 1 // only what comes next
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, ": mcpvisor gateway stream\n\n")
	flush(w)
	keepalive := time.NewTicker(25 * time.Second)
	defer keepalive.Stop()
	for {
		frames, first, wake, closed := s.out.since(after)
		for i, f := range frames {
			writeEvent(w, strconv.FormatUint(first+uint64(i), 10), f)
		}
		if len(frames) > 0 {
			after = first + uint64(len(frames)) - 1
			flush(w)
		}
		if closed {
			return
		}
		s.touch()
		select {
		case <-wake:
		case <-keepalive.C:
			_, _ = io.WriteString(w, ": keepalive\n\n")
			flush(w)
		case <-r.Context().Done():
			return
		}
	}
}

func (g *Gateway) serveDelete(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(sessionHeader)
	g.mu.Lock()
	s := g.sessions[sid]
	delete(g.sessions, sid)
	g.mu.Unlock()
	if s == nil {
		httpError(w, http.StatusNotFound, "session not found")
		return
	}
	s.close()
	w.WriteHeader(http.StatusOK)
}

// expireSessions closes the HTTP sessions idle longer than
// Options.SessionIdle.
func (g *Gateway) expireSessions(now time.Time) {
	g.mu.Lock()
	var idle []*session
	for id, s := range g.sessions {
		if s.out == nil {
			continue // stdio
		}
		s.mu.Lock()
		old := now.Sub(s.lastUsed) > g.opts.SessionIdle
		s.mu.Unlock()
		if old {
			idle = append(idle, s)
			delete(g.sessions, id)
		}
	}
	g.mu.Unlock()
	for _, s := range idle {
		s.close()
	}
}

// Serve serves the handler on l until ctx ends, then shuts the server
// down (streams are ended by Close/Drain first).
func (g *Gateway) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: g.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return nil
}

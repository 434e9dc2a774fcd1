package mockserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports/eventstream"
)

// HTTP header names of the Streamable HTTP transport.
//
// TODO: move to protocol (or transports), shared with the client.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "MCP-Protocol-Version"
	headerMethod          = "Mcp-Method" // 2026-07-28 (SEP-2243)
	headerName            = "Mcp-Name"   // 2026-07-28 (SEP-2243): tools/call, resources/read, prompts/get
	headerLastEventID     = "Last-Event-ID"
)

// Limits of the HTTP transports.
const (
	maxBody    = 64 << 20 // a request body, or a WebSocket message
	maxStreams = 256      // resumable POST streams kept per session
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
// for good: the request in flight and every later one is aborted
// (http.ErrAbortHandler). Process-level options (ExitAtStart,
// IgnoreSIGTERM, Grandchild, Listen) and flapping (FlapUp, FlapDown:
// Serve's business) do not concern it.
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

// handler serves the HTTP transports. Every request runs in its own
// goroutine; the mutex guards the session table, the fault counters and
// the open listen streams, each session its own, each stream its own.
type handler struct {
	s         *server
	o         Options
	transport string
	retry     time.Duration

	closing  chan struct{} // closed by shutdown
	dead     chan struct{} // closed when an exit fault fires
	exitOnce sync.Once
	code     int // written before dead is closed

	stateless peer           // shared by stateless requests
	conns     sync.WaitGroup // WebSocket connections

	mu       sync.Mutex
	sessions map[string]*session     // guarded by mu
	armed    bool                    // guarded by mu: an initialize or server/discover came in
	burst    int                     // guarded by mu: 503s still to send once armed
	cuts     int                     // guarded by mu: answers broken so far (CutStreams)
	listens  map[*stream]protocol.ID // guarded by mu: open subscriptions/listen streams
	ws       map[*wsConn]struct{}    // guarded by mu: open WebSockets
	period   uint64                  // guarded by mu: up periods ended (resets), so a WebSocket upgraded in one that ended is cut
	shut     bool                    // guarded by mu: shutdown was called
}

// session is a Streamable HTTP session or a legacy HTTP+SSE one.
type session struct {
	id     string
	legacy bool
	peer   peer
	get    *stream // the standalone GET stream (resumable), or the legacy SSE stream

	mu      sync.Mutex
	calls   int                // guarded by mu: tools/call received
	next    uint32             // guarded by mu: number of the last POST stream
	streams map[uint32]*stream // guarded by mu: resumable POST streams, the newest maxStreams
	order   []uint32           // guarded by mu: their numbers, oldest first
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
	h := &handler{
		s: newServer(o), o: o, transport: t, retry: o.SSERetry,
		closing: make(chan struct{}), dead: make(chan struct{}),
		sessions: make(map[string]*session), listens: make(map[*stream]protocol.ID),
		ws: make(map[*wsConn]struct{}),
	}
	if h.retry <= 0 {
		h.retry = DefaultSSERetry
	}
	return h, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.o.FirstByteDelay > 0 {
		w = &delayedWriter{ResponseWriter: w, ctx: r.Context(), d: h.o.FirstByteDelay}
	}
	select {
	case <-h.dead:
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
	case h.transport == TransportHTTP && r.URL.Path == "/mcp":
		switch r.Method {
		case http.MethodPost:
			h.post(w, r)
		case http.MethodGet:
			h.get(w, r)
		case http.MethodDelete:
			h.delete(w, r)
		default:
			notAllowed(w, "GET, POST, DELETE")
		}
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
	io.WriteString(w, `{"error":"invalid_token","error_description":"mockserver: authorization required (-http-401)"}`+"\n")
}

// hang answers nothing until the client or the server goes away.
func (h *handler) hang(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-h.closing:
		panic(http.ErrAbortHandler)
	case <-h.dead:
		panic(http.ErrAbortHandler)
	}
}

// die fires the exit fault: every response stops, and so does Serve's
// server.
func (h *handler) die(code int) {
	h.exitOnce.Do(func() {
		h.code = code
		close(h.dead)
	})
}

// abortIfDead aborts the response when the exit fault has fired, or
// fires it when err is pump's errCrashed.
func (h *handler) abortIfDead(err error) {
	if errors.Is(err, errCrashed) {
		h.die(exitCrash)
	}
	if errors.Is(err, errDead) || errors.Is(err, errCrashed) {
		panic(http.ErrAbortHandler)
	}
	select {
	case <-h.dead:
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
	sessions := make([]*session, 0, len(h.sessions))
	for _, sess := range h.sessions {
		sessions = append(sessions, sess)
	}
	listens := make(map[*stream]protocol.ID, len(h.listens))
	for st, id := range h.listens {
		listens[st] = id
	}
	h.mu.Unlock()
	for st, id := range listens {
		st.finish(listenComplete(id))
	}
	for _, sess := range sessions {
		sess.get.end()
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
	sessions := make([]*session, 0, len(h.sessions))
	for _, sess := range h.sessions {
		sessions = append(sessions, sess)
	}
	clear(h.sessions)
	listens := make([]*stream, 0, len(h.listens))
	for st := range h.listens {
		listens = append(listens, st)
	}
	ws := make([]*wsConn, 0, len(h.ws))
	for c := range h.ws {
		ws = append(ws, c)
	}
	h.mu.Unlock()
	for _, sess := range sessions {
		h.s.hub.remove(sess.get)
		sess.get.cut()
	}
	for _, st := range listens {
		st.cut()
	}
	for _, c := range ws {
		c.c.CloseNow()
	}
}

// arm starts the 5xx burst: called when an initialize or server/discover
// request comes in, before it is answered.
func (h *handler) arm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.armed {
		h.armed = true
		h.burst = h.o.HTTP5xx
	}
}

// takeCut reports whether the answer of this stateless request is to be
// lost (CutStreams), counting it.
func (h *handler) takeCut() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cuts >= h.o.CutStreams {
		return false
	}
	h.cuts++
	return true
}

// takeBurst reports whether this POST is one of the burst's 503s.
func (h *handler) takeBurst() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.armed && h.burst > 0 {
		h.burst--
		return true
	}
	return false
}

func (h *handler) newSession(legacy bool) *session {
	var b [16]byte
	_, _ = rand.Read(b[:])
	sess := &session{id: hex.EncodeToString(b[:]), legacy: legacy, streams: make(map[uint32]*stream)}
	if legacy {
		sess.get = newStream(0, "message", false, false, h.o.Garbage)
	} else {
		sess.get = newStream(0, "", true, false, h.o.Garbage)
	}
	h.mu.Lock()
	h.sessions[sess.id] = sess
	h.mu.Unlock()
	h.s.hub.add(sess.get)
	return sess
}

// session returns the live session id of the given kind, or nil.
func (h *handler) session(id string, legacy bool) *session {
	h.mu.Lock()
	defer h.mu.Unlock()
	sess := h.sessions[id]
	if sess == nil || sess.legacy != legacy {
		return nil
	}
	return sess
}

// dropSession forgets sess and ends its standalone (or legacy) stream.
// POSTs in flight finish.
func (h *handler) dropSession(sess *session) {
	h.forget(sess)
	sess.get.end()
}

// forget removes sess from the session table: its next request gets 404.
func (h *handler) forget(sess *session) {
	h.mu.Lock()
	delete(h.sessions, sess.id)
	h.mu.Unlock()
	h.s.hub.remove(sess.get)
}

// called counts a tools/call on the session and reports whether it is
// the one after which the session expires.
func (sess *session) called(expireAfter int) bool {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sess.calls++
	return expireAfter > 0 && sess.calls == expireAfter
}

// postStream returns the stream a POSTed request is answered on: with
// event streams a new resumable one the session keeps, else one for a
// single JSON answer.
func (h *handler) postStream(sess *session) *stream {
	if !h.o.SSEResponses {
		return newStream(0, "", false, true, false)
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sess.next++
	st := newStream(sess.next, "", true, true, h.o.Garbage)
	sess.streams[st.no] = st
	sess.order = append(sess.order, st.no)
	if len(sess.order) > maxStreams {
		delete(sess.streams, sess.order[0])
		sess.order = sess.order[1:]
	}
	return st
}

// stream returns the session's stream number no, or nil.
func (sess *session) stream(no uint32) *stream {
	if no == 0 {
		return sess.get
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.streams[no]
}

// servesSessions reports whether the server serves a handshake era.
func (h *handler) servesSessions() bool {
	return slices.ContainsFunc(h.s.versions, func(v string) bool { return !protocol.UsesDiscover(v) })
}

// readMessage reads and decodes a POST body; on failure it answers 400
// (413 for a body over maxBody) and returns nil.
func readMessage(w http.ResponseWriter, r *http.Request) *protocol.Message {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		status := http.StatusBadRequest
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		httpError(w, status, protocol.ID{}, protocol.NewError(protocol.CodeParseError, "reading the body: %v", err))
		return nil
	}
	m, err := decode(body)
	if err != nil {
		code := int64(protocol.CodeParseError)
		if !errors.Is(err, protocol.ErrParse) {
			code = protocol.CodeInvalidRequest
		}
		httpError(w, http.StatusBadRequest, protocol.ID{}, protocol.NewError(code, "%v", err))
		return nil
	}
	return m
}

// post serves POST /mcp.
func (h *handler) post(w http.ResponseWriter, r *http.Request) {
	if h.takeBurst() {
		http.Error(w, "mockserver: injected 503", http.StatusServiceUnavailable)
		return
	}
	m := readMessage(w, r)
	if m == nil {
		return
	}
	ver := ""
	if m.Kind != protocol.KindResponse {
		ver = requestVersion(m.Params)
	}
	if h.s.servesModern() && r.Header.Get(headerSessionID) == "" && m.Method != protocol.MethodInitialize &&
		(m.Method == protocol.MethodDiscover || protocol.UsesDiscover(ver) || protocol.UsesDiscover(r.Header.Get(headerProtocolVersion))) {
		h.postStateless(w, r, m, ver)
		return
	}
	h.postSession(w, r, m)
}

// postSession serves a POST of the handshake eras.
func (h *handler) postSession(w http.ResponseWriter, r *http.Request, m *protocol.Message) {
	if m.Kind == protocol.KindRequest && m.Method == protocol.MethodInitialize {
		h.arm()
		sess := h.newSession(false)
		w.Header().Set(headerSessionID, sess.id)
		h.answer(w, r, sess, m)
		return
	}
	sid := r.Header.Get(headerSessionID)
	if sid == "" {
		httpError(w, http.StatusBadRequest, m.ID, protocol.NewError(protocol.CodeInvalidRequest, "Bad Request: %s header is required", headerSessionID))
		return
	}
	sess := h.session(sid, false)
	if sess == nil {
		httpError(w, http.StatusNotFound, m.ID, protocol.NewError(protocol.CodeInvalidRequest, "session not found"))
		return
	}
	if v := r.Header.Get(headerProtocolVersion); v != "" && !slices.Contains(h.s.versions, v) {
		httpError(w, http.StatusBadRequest, m.ID, protocol.NewError(protocol.CodeInvalidRequest, "Bad Request: unsupported %s %q", headerProtocolVersion, v))
		return
	}
	if m.Kind != protocol.KindRequest {
		sess.peer.note(m)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	h.answer(w, r, sess, m)
}

// answer dispatches a session's request and writes its answer, as JSON or
// as an event stream.
func (h *handler) answer(w http.ResponseWriter, r *http.Request, sess *session, m *protocol.Message) {
	ctx := r.Context()
	st := h.postStream(sess)
	if h.o.SSEResponses {
		st.prime(h.retry)
	}
	if code, exit := h.s.dispatch(ctx, &sess.peer, m, false, st); exit {
		h.die(code)
		panic(http.ErrAbortHandler)
	}
	call := m.Method == protocol.MethodToolsCall
	if call && sess.called(h.o.ExpireSessionAfter) {
		// Before the answer is out, so that the client's next request
		// surely finds the session gone; the answer has its own stream.
		h.dropSession(sess)
	}
	if !h.o.SSEResponses {
		h.writeAnswer(w, r, st, false)
		return
	}
	startEventStream(w)
	if h.o.DropStream && call {
		// The priming event only: the response waits in the stream's log
		// for a GET with Last-Event-ID.
		_ = st.write(w, event{seq: 1, retry: h.retry})
		_ = http.NewResponseController(w).Flush()
		return
	}
	h.abortIfDead(st.pump(ctx, w, 0, h.dead))
}

// writeAnswer waits for st's answer and writes it as the JSON body. In
// the stateless era (stateless) the protocol-level errors are 400s, and
// with SSEResponses other answers are one-event streams.
func (h *handler) writeAnswer(w http.ResponseWriter, r *http.Request, st *stream, stateless bool) {
	ev, ok := st.await(r.Context(), h.dead)
	if !ok {
		h.abortIfDead(nil)
		if r.Context().Err() == nil {
			panic(http.ErrAbortHandler) // ended without an answer
		}
		return
	}
	if ev.partial {
		h.crashAnswer(w, st, ev, stateless && h.o.SSEResponses)
	}
	status := http.StatusOK
	if stateless && ev.oversize == 0 && isProtocolError(ev.data) {
		status = http.StatusBadRequest
	}
	if stateless && h.o.SSEResponses && status == http.StatusOK {
		startEventStream(w)
		if h.o.Garbage {
			_ = st.write(w, event{data: []byte(garbageLine)})
		}
		_ = st.write(w, ev)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if h.o.Garbage {
		io.WriteString(w, garbageLine+"\n"+garbageFrame+"\n")
	}
	if ev.oversize > 0 {
		_ = writeOversize(w, ev.id, ev.oversize)
		return
	}
	w.Write(ev.data)
}

// crashAnswer writes half of a crash's answer (CrashMidResponse) and ends
// the server: as a one-event stream whose event stops halfway, or as a
// 200 whose Content-Length counts the whole answer, with half the body.
// It does not return.
func (h *handler) crashAnswer(w http.ResponseWriter, st *stream, ev event, eventStream bool) {
	if eventStream {
		startEventStream(w)
		_ = st.write(w, ev)
	} else {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(ev.data)))
		w.WriteHeader(http.StatusOK)
		w.Write(ev.data[:len(ev.data)/2])
	}
	_ = http.NewResponseController(w).Flush()
	h.die(exitCrash)
	panic(http.ErrAbortHandler)
}

// isProtocolError reports whether frame is an error the stateless era
// answers with HTTP 400.
func isProtocolError(frame []byte) bool {
	var m struct {
		Error *protocol.Error `json:"error"`
	}
	if json.Unmarshal(frame, &m) != nil || m.Error == nil {
		return false
	}
	switch m.Error.Code {
	case protocol.CodeHeaderMismatch, protocol.CodeMissingRequiredClientCapability, protocol.CodeUnsupportedProtocolVersion:
		return true
	}
	return false
}

// postStateless serves a POST of the stateless era (2026-07-28): no
// session; the Mcp-Method (and Mcp-Name, MCP-Protocol-Version) headers
// must agree with the body.
func (h *handler) postStateless(w http.ResponseWriter, r *http.Request, m *protocol.Message, ver string) {
	if m.Kind == protocol.KindResponse {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if got := r.Header.Get(headerMethod); got != m.Method {
		httpError(w, http.StatusBadRequest, m.ID, protocol.NewError(protocol.CodeHeaderMismatch,
			"%s header %q does not match the method %q", headerMethod, got, m.Method))
		return
	}
	if got := r.Header.Get(headerName); got != "" {
		if want := requestName(m); got != want {
			httpError(w, http.StatusBadRequest, m.ID, protocol.NewError(protocol.CodeHeaderMismatch,
				"%s header %q does not match %q", headerName, got, want))
			return
		}
	}
	if got := r.Header.Get(headerProtocolVersion); got != "" && ver != "" && got != ver {
		httpError(w, http.StatusBadRequest, m.ID, protocol.NewError(protocol.CodeHeaderMismatch,
			"%s header %q does not match the request's protocol version %q", headerProtocolVersion, got, ver))
		return
	}
	modern := protocol.UsesDiscover(ver) && slices.Contains(h.s.versions, ver)
	if protocol.UsesDiscover(ver) && !modern {
		httpError(w, http.StatusBadRequest, m.ID, h.s.unsupportedVersion(ver))
		return
	}
	if m.Kind == protocol.KindNotification {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	switch m.Method {
	case protocol.MethodSubscriptionsListen:
		if modern {
			h.listen(w, r, m)
			return
		}
	case protocol.MethodDiscover:
		h.arm()
	}
	st := newStream(0, "", false, true, false)
	if code, exit := h.s.dispatch(r.Context(), &h.stateless, m, modern, st); exit {
		h.die(code)
		panic(http.ErrAbortHandler)
	}
	if m.Method != protocol.MethodDiscover && (h.o.CutMethod == "" || h.o.CutMethod == m.Method) && h.takeCut() {
		// The request was processed; its answer is lost with the
		// stream (2026-07-28 has no resumption).
		if h.o.SSEResponses {
			startEventStream(w)
			return
		}
		panic(http.ErrAbortHandler) // the connection closes, no response
	}
	if h.o.SSEResponses && h.o.DropStream && m.Method == protocol.MethodToolsCall {
		// The stateless era has no resumption: the stream ends empty and
		// the client must send the request again, with a new id.
		startEventStream(w)
		return
	}
	h.writeAnswer(w, r, st, true)
}

// requestName returns what the Mcp-Name header mirrors: the tool or
// prompt name, or the resource URI.
func requestName(m *protocol.Message) string {
	var p struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	_ = json.Unmarshal(m.Params, &p)
	if m.Method == protocol.MethodResourcesRead {
		return p.URI
	}
	return p.Name
}

// listen serves subscriptions/listen over Streamable HTTP: an event
// stream whose first message is the acknowledgement, then the agreed
// notifications, until the client goes away, ListenCut cuts it, or the
// server shuts down (a complete result ends it).
func (h *handler) listen(w http.ResponseWriter, r *http.Request, m *protocol.Message) {
	agreed := h.s.agreedFilter(m.Params)
	st := newStream(0, "", false, false, h.o.Garbage)
	st.notify(listenAck(m.ID, agreed))
	h.mu.Lock()
	if h.shut {
		h.mu.Unlock()
		http.Error(w, "mockserver: shutting down", http.StatusServiceUnavailable)
		return
	}
	h.listens[st] = m.ID
	h.mu.Unlock()
	sub := newSubscription(m.ID, agreed, st)
	h.s.hub.subscribe(sub, nil)
	defer func() {
		h.s.hub.unsubscribe(sub)
		h.mu.Lock()
		delete(h.listens, st)
		h.mu.Unlock()
	}()
	if h.o.ListenCut > 0 {
		t := time.AfterFunc(h.o.ListenCut, st.cut)
		defer t.Stop()
	}
	startEventStream(w)
	h.abortIfDead(st.pump(r.Context(), w, 0, h.dead))
}

// get serves GET /mcp: the standalone stream, or with Last-Event-ID the
// resumption of any stream of the session (NoGetStream refuses only the
// former).
func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	last := r.Header.Get(headerLastEventID)
	if !h.servesSessions() || protocol.UsesDiscover(r.Header.Get(headerProtocolVersion)) || (h.o.NoGetStream && last == "") {
		notAllowed(w, "POST, DELETE")
		return
	}
	sess := h.requestSession(w, r)
	if sess == nil {
		return
	}
	st, after := sess.get, sess.get.last()
	if last != "" {
		no, seq, ok := parseEventID(last)
		if ok {
			st, after = sess.stream(no), seq
		}
		if !ok || st == nil {
			httpError(w, http.StatusBadRequest, protocol.ID{}, protocol.NewError(protocol.CodeInvalidRequest, "unknown %s %q", headerLastEventID, last))
			return
		}
	}
	startEventStream(w)
	h.abortIfDead(st.pump(r.Context(), w, after, h.dead))
}

// delete serves DELETE /mcp: the session ends.
func (h *handler) delete(w http.ResponseWriter, r *http.Request) {
	if !h.servesSessions() || protocol.UsesDiscover(r.Header.Get(headerProtocolVersion)) {
		notAllowed(w, "POST")
		return
	}
	if sess := h.requestSession(w, r); sess != nil {
		h.dropSession(sess)
		w.WriteHeader(http.StatusOK)
	}
}

// requestSession returns the request's session, or answers 400 (no
// Mcp-Session-Id) or 404 (unknown) and returns nil.
func (h *handler) requestSession(w http.ResponseWriter, r *http.Request) *session {
	sid := r.Header.Get(headerSessionID)
	if sid == "" {
		httpError(w, http.StatusBadRequest, protocol.ID{}, protocol.NewError(protocol.CodeInvalidRequest, "Bad Request: %s header is required", headerSessionID))
		return nil
	}
	sess := h.session(sid, false)
	if sess == nil {
		httpError(w, http.StatusNotFound, protocol.ID{}, protocol.NewError(protocol.CodeInvalidRequest, "session not found"))
	}
	return sess
}

// legacyStream serves GET /sse: a new HTTP+SSE session, announced by the
// endpoint event, whose answers and notifications are message events. The
// session ends with the stream.
func (h *handler) legacyStream(w http.ResponseWriter, r *http.Request) {
	sess := h.newSession(true)
	defer h.dropSession(sess)
	startEventStream(w)
	if err := eventstream.Write(w, eventstream.Event{Type: "endpoint", Data: []byte("/message?sessionId=" + sess.id)}, 0); err != nil {
		return
	}
	if http.NewResponseController(w).Flush() != nil {
		return
	}
	h.abortIfDead(sess.get.pump(r.Context(), w, 0, h.dead))
}

// legacyPost serves POST /message?sessionId=…: 202, the answer goes to
// the session's stream.
func (h *handler) legacyPost(w http.ResponseWriter, r *http.Request) {
	if h.takeBurst() {
		http.Error(w, "mockserver: injected 503", http.StatusServiceUnavailable)
		return
	}
	sess := h.session(r.URL.Query().Get("sessionId"), true)
	if sess == nil {
		http.Error(w, "mockserver: session not found", http.StatusNotFound)
		return
	}
	m := readMessage(w, r)
	if m == nil {
		return
	}
	if m.Kind != protocol.KindRequest {
		sess.peer.note(m)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if m.Method == protocol.MethodInitialize {
		h.arm()
	}
	w.WriteHeader(http.StatusAccepted)
	var out output = sess.get
	if m.Method == protocol.MethodToolsCall && sess.called(h.o.ExpireSessionAfter) {
		// The session is forgotten at once; its stream ends after the
		// answer.
		h.forget(sess)
		out = lastAnswer{sess.get}
	}
	if code, exit := h.s.dispatch(r.Context(), &sess.peer, m, false, out); exit {
		h.die(code)
		panic(http.ErrAbortHandler)
	}
}

// lastAnswer ends a legacy session's stream after the answer that
// expires the session.
type lastAnswer struct{ st *stream }

func (l lastAnswer) send(frame []byte) { l.st.finish(frame) }

func (l lastAnswer) crash(frame []byte) bool { return l.st.crash(frame) }

func (l lastAnswer) sendOversize(id protocol.ID, size int64) {
	l.st.sendOversize(id, size)
	l.st.end()
}

// startEventStream writes the headers of an event stream and flushes them.
func startEventStream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush()
}

// httpError answers with status and a JSON-RPC error body.
func httpError(w http.ResponseWriter, status int, id protocol.ID, e *protocol.Error) {
	body, _ := protocol.AppendError(nil, id, e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
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

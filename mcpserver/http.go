package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Streamable HTTP, at one endpoint:
//
//   - POST carries one message. A request of the stateless era is served
//     on its own (see headers.go); initialize opens a session, whose id
//     (Mcp-Session-Id) every later request of that client carries; an
//     unknown id is 404, a missing one 400. A request is answered with
//     JSON, or with an event stream once the request sends a
//     notification of its own (or always, resumable, with
//     HTTPOptions.SSEResponses). Notifications and responses get 202.
//   - GET opens a session's standalone stream: the session's
//     notifications, numbered; with Last-Event-ID it resumes that stream
//     or a resumable POST stream after that event.
//   - DELETE ends a session.
//
// The stateless era has no GET and no DELETE (405).

// HTTPHandler returns the Streamable HTTP endpoint (mount it at /mcp).
// After Shutdown it answers 503.
func (s *Server) HTTPHandler() http.Handler { return http.HandlerFunc(s.http.serveHTTP) }

// httpTransport is the Server's Streamable HTTP front end: it reads POST,
// GET and DELETE, finds or opens the session (sealed ids included, see
// sealed_http.go), hands the messages to the Server's dispatch, and
// writes the answers as JSON or event streams.
//
// Concurrency: its methods run on net/http's goroutines, many at once;
// its fields are immutable after New but for the atomic counters. The
// sessions it finds are the Server's table's.
type httpTransport struct {
	srv    *Server
	sealer *Sealer     // HTTPOptions.Seal's keys; nil: ids are not sealed
	seal   SealOptions // HTTPOptions.Seal, with its defaults

	streamsRefused, polled, bodyTimeouts atomic.Uint64
}

func (h *httpTransport) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if h.srv.table.shutting() {
		w.Header().Set("Connection", "close")
		httpError(w, http.StatusServiceUnavailable, "shutting down")
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.servePost(w, r)
	case http.MethodGet:
		h.serveGet(w, r)
	case http.MethodDelete:
		h.serveDelete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		httpError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

// httpError answers with status and a text body.
func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

// rpcError answers with status and a JSON-RPC error.
func rpcError(w http.ResponseWriter, status int, id protocol.ID, e *protocol.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(errorFrame(id, e))
}

func (h *httpTransport) servePost(w http.ResponseWriter, r *http.Request) {
	s := h.srv
	max := s.opts.MaxMessageSize
	if r.ContentLength > int64(max) {
		// Refused before a byte of it is read; the connection closes
		// rather than read the rest.
		w.Header().Set("Connection", "close")
		rpcError(w, http.StatusRequestEntityTooLarge, protocol.ID{}, protocol.NewError(protocol.CodeInvalidRequest, "message larger than %d bytes", max))
		return
	}
	body, err := h.readBody(w, r, max)
	if errors.Is(err, errBodyTimeout) {
		h.bodyTimeouts.Add(1)
		w.Header().Set("Connection", "close")
		httpError(w, http.StatusRequestTimeout, "request timeout: the body did not arrive within "+s.opts.HTTP.BodyTimeout.String())
		return
	}
	if err != nil {
		httpError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	if len(body) > max {
		rpcError(w, http.StatusRequestEntityTooLarge, protocol.ID{}, protocol.NewError(protocol.CodeInvalidRequest, "message larger than %d bytes", max))
		return
	}
	m, err := protocol.Decode(body)
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(decodeError(err))
		return
	}
	var (
		sess      *Session
		meta      *Meta
		stateless bool
		fresh     bool // a session initialize opens
	)
	switch sid := r.Header.Get(HeaderSessionID); {
	case sid != "":
		if sess, err = h.sessionFor(r.Context(), sid); sess == nil {
			answerNoSession(w, err, func(status int) {
				rpcError(w, status, m.ID, protocol.NewError(protocol.CodeInvalidRequest, "%s", noSessionMessage(status)))
			})
			return
		}
		if hv := strings.TrimSpace(r.Header.Get(HeaderProtocolVersion)); hv != "" && !slices.Contains(s.eras.versions, hv) {
			rpcError(w, http.StatusBadRequest, m.ID, s.eras.unsupportedVersion(hv))
			return
		}
	case m.Kind != protocol.KindRequest:
		// A notification or answer outside any session (the stateless
		// era's, or a client that lost its session): nothing to do.
		w.WriteHeader(http.StatusAccepted)
		return
	case s.eras.statelessPost(r.Header, m):
		var perr *protocol.Error
		if meta, perr = s.eras.checkStateless(r.Header, m); perr != nil {
			rpcError(w, http.StatusBadRequest, m.ID, perr)
			return
		}
		sess = newSession(s, kindRequest)
		sess.modern, sess.version, sess.meta = true, meta.Version, meta
		stateless = true
	case m.Method == protocol.MethodInitialize && s.eras.handshake:
		// Refused before a session is made: no id is sealed, no
		// session evicted for it.
		if perr := s.budget.checkInitSize(m.Params); perr != nil {
			rpcError(w, http.StatusOK, m.ID, perr)
			return
		}
		if sess, err = h.newHTTPSession(m.Params); err != nil {
			rpcError(w, http.StatusInternalServerError, m.ID, protocol.NewError(protocol.CodeInternalError, "sealing the session id: %v", err))
			return
		}
		fresh = true
	default:
		rpcError(w, http.StatusBadRequest, m.ID, protocol.NewError(protocol.CodeInvalidRequest, "Bad Request: the %s header is required (initialize opens a session)", HeaderSessionID))
		return
	}
	if m.Kind != protocol.KindRequest {
		sess.touch()
		if m.Kind == protocol.KindNotification {
			s.handleNotification(r.Context(), sess, m)
		} else {
			s.handleResponse(sess, m)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	sse := acceptsSSE(r)
	if m.Method == protocol.MethodSubscriptionsListen && !sse {
		rpcError(w, http.StatusNotAcceptable, m.ID, protocol.NewError(protocol.CodeInvalidRequest, "subscriptions/listen needs Accept: text/event-stream"))
		return
	}
	if fresh {
		if s.table.admit(sess, initStateSize(m.Params)) == nil { // a fresh id is new: nil only when there is no room
			s.budget.retainedRefused.Add(1)
			w.Header().Set("Retry-After", "1")
			rpcError(w, http.StatusServiceUnavailable, m.ID, stateError(protocol.MethodInitialize, boundTotal, s.budget.maxRetained, s.budget.retained.Load()))
			return
		}
		w.Header().Set(HeaderSessionID, sess.id)
	}
	p := &postResponse{srv: s, w: w, r: r, sse: sse, stateless: stateless}
	var out outlet = p
	if !stateless && s.opts.HTTP.SSEResponses {
		p.resumable = sess.streams.newPost(false)
		p.resumable.push(event{retry: s.opts.HTTP.SSERetry})
		out = resumableOutlet{p}
	} else if stateless && s.opts.HTTP.SSEResponses && sse {
		p.sseAnswer = true
	}
	parent := r.Context()
	pollAfter := h.pollAfter(sess, m, sse, stateless || fresh)
	if pollAfter > 0 {
		// The request may outlive its POST (finish cancels it if the
		// client goes away before the poll).
		parent = context.WithoutCancel(parent)
	}
	x, ok := newExchange(parent, s, sess, m, out, true)
	if !ok {
		rpcError(w, http.StatusNotFound, m.ID, protocol.NewError(protocol.CodeInvalidRequest, "session not found: initialize a new one"))
		return
	}
	x.req.Header, x.req.Meta = r.Header, meta
	p.x = x
	if stateless && s.opts.HTTP.CheckHeaders != nil {
		if perr := s.opts.HTTP.CheckHeaders(r.Header, &x.req); perr != nil {
			x.abandon()
			rpcError(w, http.StatusBadRequest, m.ID, perr)
			return
		}
	}
	stopKeepAlive := p.keepAlive()
	if pollAfter > 0 && (s.opts.HTTP.Pollable == nil || s.opts.HTTP.Pollable(&x.req)) {
		p.pollAfter = pollAfter
		go s.serveRequest(x)
	} else {
		s.serveRequest(x)
	}
	code := p.finish()
	stopKeepAlive()
	switch {
	case stateless:
		sess.Close()
	case fresh && code != 0:
		sess.Close() // initialize failed: no session
	}
}

// acceptsSSE reports whether a request takes an event stream: its Accept
// header names text/event-stream or */*, or it has none.
func acceptsSSE(r *http.Request) bool {
	vs := r.Header.Values("Accept")
	if len(vs) == 0 {
		return true
	}
	for _, v := range vs {
		if strings.Contains(v, "text/event-stream") || strings.Contains(v, "*/*") {
			return true
		}
	}
	return false
}

// newHTTPSession returns a new HTTP session (not yet admitted) for the
// initialize whose params are given: its id is random, or, with
// HTTPOptions.Seal, the sealed session.
func (h *httpTransport) newHTTPSession(initParams json.RawMessage) (*Session, error) {
	if h.sealer == nil {
		return h.newHTTPSessionWithID(newSessionID()), nil
	}
	id, st, err := h.sealedID(initParams)
	if err != nil {
		return nil, err
	}
	sess := h.newHTTPSessionWithID(id)
	sess.sealed, sess.checkedAt = st, h.srv.opts.Now()
	return sess, nil
}

func (h *httpTransport) newHTTPSessionWithID(id string) *Session {
	sess := newSession(h.srv, kindHTTP)
	sess.id = id
	sess.log = newStream(0, h.srv.opts.HTTP.OutboxSize)
	return sess
}

// noSessionMessage is the message of a request answered status for want
// of its session.
func noSessionMessage(status int) string {
	if status == http.StatusServiceUnavailable {
		return "the session store is unavailable: retry"
	}
	return "session not found: initialize a new one"
}

// ExpireIdle closes the HTTP sessions unused for longer than idle as of
// now (a session with a GET stream open counts as used), and returns how
// many.
func (s *Server) ExpireIdle(now time.Time, idle time.Duration) int {
	old := s.table.idle(now, idle)
	for _, sess := range old {
		sess.Close()
	}
	if p, ok := s.http.seal.Store.(SessionStorePruner); ok && s.http.sealer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.http.seal.StoreTimeout)
		if err := p.Prune(ctx, now); err != nil {
			s.log.Debug().Err(err).Msg("pruning the session store")
		}
		cancel()
	}
	return len(old)
}

// serveGet serves a GET: the standalone stream of a session (its
// notifications, numbered, from now on), or with Last-Event-ID the
// resumption of one of its streams after that event.
func (h *httpTransport) serveGet(w http.ResponseWriter, r *http.Request) {
	s := h.srv
	last := r.Header.Get(HeaderLastEventID)
	if !s.eras.handshake || protocol.UsesDiscover(strings.TrimSpace(r.Header.Get(HeaderProtocolVersion))) ||
		(s.opts.HTTP.NoGetStream && last == "") {
		w.Header().Set("Allow", "POST, DELETE")
		httpError(w, http.StatusMethodNotAllowed, "method not allowed: no standalone stream (the stateless era has none)")
		return
	}
	sess := h.requestSession(w, r)
	if sess == nil {
		return
	}
	if !acceptsSSE(r) {
		httpError(w, http.StatusNotAcceptable, "GET needs Accept: text/event-stream")
		return
	}
	st, after := sess.log, sess.log.last()
	foreign := sess.streams.takeForeign()
	if last != "" {
		no, seq, ok := parseEventID(last)
		if !ok {
			rpcError(w, http.StatusBadRequest, protocol.ID{}, protocol.NewError(protocol.CodeInvalidRequest, "malformed %s %q", HeaderLastEventID, last))
			return
		}
		if no == 0 && foreign {
			seq = 0 // numbers of the replica that served it before: everything here is new to the client
		}
		if no != 0 {
			st = sess.streams.post(no)
		}
		if after = seq; st == nil {
			rpcError(w, http.StatusNotFound, protocol.ID{}, protocol.NewError(protocol.CodeInvalidRequest,
				"no stream to resume with %s %q (it was read to its end, or the session forgot it)", HeaderLastEventID, last))
			return
		}
	}
	if !sess.streams.openGet(s.opts.HTTP.MaxStreamsPerSession) {
		h.streamsRefused.Add(1)
		httpError(w, http.StatusConflict, "conflict: this session has "+strconv.Itoa(s.opts.HTTP.MaxStreamsPerSession)+
			" GET streams open already (the most it may have)")
		return
	}
	defer sess.streams.closeGet()
	startEventStream(w)
	_, _ = io.WriteString(w, ": stream\n\n")
	_ = http.NewResponseController(w).Flush()
	var keepalive time.Duration
	if st == sess.log {
		keepalive = s.opts.HTTP.KeepAlive
	}
	err := h.pump(r.Context(), w, st, after, nil, keepalive, sess.touch)
	if err == nil && st.forgetOnRead {
		sess.streams.forget(st) // read to its end: a polled request's answer is delivered
	}
	if err != nil && r.Context().Err() == nil {
		panic(http.ErrAbortHandler)
	}
}

// pollAfter returns how long request m of sess may wait for its answer
// before its POST response ends for the client to poll
// (HTTPOptions.PollAfter), or 0 when it is never polled: a session of
// an earlier version than 2025-11-25 (its clients cannot resume a POST
// stream), a POST that takes no event stream, one of the Server's own
// methods.
func (h *httpTransport) pollAfter(sess *Session, m *protocol.Message, sse, skip bool) time.Duration {
	s := h.srv
	if skip || !sse || s.opts.HTTP.PollAfter <= 0 || s.opts.HTTP.SSEResponses || sess.kind != kindHTTP || ownMethod(m.Method) {
		return 0
	}
	sess.mu.Lock()
	version, modern := sess.version, sess.modern
	sess.mu.Unlock()
	if modern || version < protocol.Version20251125 {
		return 0
	}
	return s.opts.HTTP.PollAfter
}

// serveDelete serves a DELETE: the session ends.
func (h *httpTransport) serveDelete(w http.ResponseWriter, r *http.Request) {
	if !h.srv.eras.handshake || protocol.UsesDiscover(strings.TrimSpace(r.Header.Get(HeaderProtocolVersion))) {
		w.Header().Set("Allow", "POST")
		httpError(w, http.StatusMethodNotAllowed, "method not allowed: no sessions (the stateless era has none)")
		return
	}
	if sess := h.requestSession(w, r); sess != nil {
		if sess.sealed != nil {
			if err := h.deleteSealed(r.Context(), sess); err != nil {
				w.Header().Set("Retry-After", "1")
				rpcError(w, http.StatusServiceUnavailable, protocol.ID{}, protocol.NewError(protocol.CodeInvalidRequest, "%s", noSessionMessage(http.StatusServiceUnavailable)))
				return
			}
		}
		sess.Close()
		w.WriteHeader(http.StatusOK)
	}
}

// requestSession returns the session of a GET or DELETE, or answers 400
// (no Mcp-Session-Id) or 404 (unknown) and returns nil.
func (h *httpTransport) requestSession(w http.ResponseWriter, r *http.Request) *Session {
	sid := r.Header.Get(HeaderSessionID)
	if sid == "" {
		rpcError(w, http.StatusBadRequest, protocol.ID{}, protocol.NewError(protocol.CodeInvalidRequest, "Bad Request: the %s header is required", HeaderSessionID))
		return nil
	}
	sess, err := h.sessionFor(r.Context(), sid)
	if sess == nil {
		answerNoSession(w, err, func(status int) {
			rpcError(w, status, protocol.ID{}, protocol.NewError(protocol.CodeInvalidRequest, "%s", noSessionMessage(status)))
		})
	}
	return sess
}

// startEventStream writes the headers of an event stream.
func startEventStream(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

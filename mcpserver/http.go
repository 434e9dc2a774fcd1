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
func (s *Server) HTTPHandler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if s.shutting() {
		w.Header().Set("Connection", "close")
		httpError(w, http.StatusServiceUnavailable, "shutting down")
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.servePost(w, r)
	case http.MethodGet:
		s.serveGet(w, r)
	case http.MethodDelete:
		s.serveDelete(w, r)
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

func (s *Server) servePost(w http.ResponseWriter, r *http.Request) {
	max := s.opts.MaxMessageSize
	if r.ContentLength > int64(max) {
		// Refused before a byte of it is read; the connection closes
		// rather than read the rest.
		w.Header().Set("Connection", "close")
		rpcError(w, http.StatusRequestEntityTooLarge, protocol.ID{}, protocol.NewError(protocol.CodeInvalidRequest, "message larger than %d bytes", max))
		return
	}
	body, err := s.readBody(w, r, max)
	if errors.Is(err, errBodyTimeout) {
		s.bodyTimeouts.Add(1)
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
		if sess, err = s.sessionFor(r.Context(), sid); sess == nil {
			answerNoSession(w, err, func(status int) {
				rpcError(w, status, m.ID, protocol.NewError(protocol.CodeInvalidRequest, "%s", noSessionMessage(status)))
			})
			return
		}
		if hv := strings.TrimSpace(r.Header.Get(HeaderProtocolVersion)); hv != "" && !slices.Contains(s.versions, hv) {
			rpcError(w, http.StatusBadRequest, m.ID, s.unsupportedVersion(hv))
			return
		}
	case m.Kind != protocol.KindRequest:
		// A notification or answer outside any session (the stateless
		// era's, or a client that lost its session): nothing to do.
		w.WriteHeader(http.StatusAccepted)
		return
	case s.statelessPost(r.Header, m):
		var perr *protocol.Error
		if meta, perr = s.checkStateless(r.Header, m); perr != nil {
			rpcError(w, http.StatusBadRequest, m.ID, perr)
			return
		}
		sess = newSession(s, kindRequest)
		sess.modern, sess.version, sess.meta = true, meta.Version, meta
		stateless = true
	case m.Method == protocol.MethodInitialize && s.servesHandshake():
		// Refused before a session is made: no id is sealed, no
		// session evicted for it.
		if perr := s.budget.checkInitSize(m.Params); perr != nil {
			rpcError(w, http.StatusOK, m.ID, perr)
			return
		}
		if sess, err = s.newHTTPSession(m.Params); err != nil {
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
		if s.admit(sess, initStateSize(m.Params)) == nil { // a fresh id is new: nil only when there is no room
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
	pollAfter := s.pollAfter(sess, m, sse, stateless || fresh)
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
func (s *Server) newHTTPSession(initParams json.RawMessage) (*Session, error) {
	if s.sealer == nil {
		return s.newHTTPSessionWithID(newSessionID()), nil
	}
	id, st, err := s.sealedID(initParams)
	if err != nil {
		return nil, err
	}
	sess := s.newHTTPSessionWithID(id)
	sess.sealed, sess.checkedAt = st, s.opts.Now()
	return sess, nil
}

func (s *Server) newHTTPSessionWithID(id string) *Session {
	sess := newSession(s, kindHTTP)
	sess.id = id
	sess.log = newStream(0, s.opts.HTTP.OutboxSize)
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

// admit registers the new HTTP session sess, charging it its overhead,
// its state and extra more bytes (those of the initialize that opens it,
// which its per-session bound was checked against), first evicting the
// longest idle sessions when HTTPOptions.MaxSessions or
// Options.MaxRetained would be passed. Sessions without requests in
// flight or streams open go first; a busy one goes only when every other
// session is busy too (the cap is a bound, not a wish). Finding the
// longest idle is a scan of every session, so at the session cap a 64th
// of the cap goes at once (at least one), and at the byte bound sessions
// go until a 64th of it is free besides sess: a flood of new sessions
// costs one scan per many of them, not one each. When a session by sess's
// id is held already (two requests restored one sealed session at once),
// that one is returned and sess is dropped. With extra > 0, nil is
// returned (and nothing done) when even with every HTTP session evicted
// sess would pass Options.MaxRetained (what holds the rest are
// connections and stateless-era listen streams).
func (s *Server) admit(sess *Session, extra int64) *Session {
	limit := s.opts.HTTP.MaxSessions
	s.mu.Lock()
	if held := s.byID[sess.id]; held != nil {
		s.mu.Unlock()
		return held
	}
	keep := len(s.byID)
	if limit > 0 && len(s.byID) >= limit {
		keep = limit - max(1, limit/64)
	}
	overhead := int64(sessionOverhead)
	if sess.sealed != nil {
		// A sealed id carries the client's info and capabilities once
		// more: part of the session's fixed cost (in the total, not in
		// its own bound).
		overhead += int64(len(sess.id))
	}
	sess.mu.Lock()
	need := overhead + sess.bytes.state + extra
	sess.mu.Unlock()
	var goal int64 = -1 // the total to get down to before sess is charged; -1: no need
	if m := s.budget.maxRetained; m > 0 && s.budget.retained.Load()+need > m {
		goal = max(m-m/64-need, 0)
	}
	evicted, forBytes := s.evictLocked(keep, goal)
	if extra > 0 && s.budget.maxRetained > 0 && s.budget.retained.Load()+need > s.budget.maxRetained {
		s.mu.Unlock()
		s.closeEvicted(evicted, forBytes)
		return nil
	}
	sess.mu.Lock()
	sess.bytes.overhead = overhead
	sess.bytes.initState += extra
	sess.bytes.state += extra
	s.budget.retained.Add(sess.bytes.overhead + sess.bytes.state)
	sess.mu.Unlock()
	s.sessions[sess] = struct{}{}
	s.byID[sess.id] = sess
	s.mu.Unlock()
	s.closeEvicted(evicted, forBytes)
	return sess
}

// closeEvicted closes the sessions evictLocked removed and counts them.
func (s *Server) closeEvicted(evicted []*Session, forBytes int) {
	for _, e := range evicted {
		s.log.Debug().Str("session", sessionTag(e.id)).Msg("session evicted: the session cap or the byte bound was reached")
		e.Close()
	}
	s.sessionsEvicted.Add(uint64(len(evicted)))
	s.budget.evictedForBytes.Add(uint64(forBytes))
}

// evictLocked removes HTTP sessions, idle before busy and longest unused
// first, until at most keep remain and (goal ≥ 0) the Server's total
// less what they hold is at most goal, and returns them, with how many
// went for the bytes alone. Called with s.mu held.
func (s *Server) evictLocked(keep int, goal int64) ([]*Session, int) {
	if len(s.byID) <= keep && goal < 0 {
		return nil, 0
	}
	type candidate struct {
		s        *Session
		lastUsed time.Time
		busy     bool
		bytes    int64
	}
	all := make([]candidate, 0, len(s.byID))
	for _, sess := range s.byID {
		sess.mu.Lock()
		all = append(all, candidate{s: sess, lastUsed: sess.lastUsed, busy: len(sess.inflight) > 0 || sess.streams.open() > 0,
			bytes: sess.bytes.state + sess.bytes.overhead})
		sess.mu.Unlock()
	}
	slices.SortFunc(all, func(a, b candidate) int {
		switch {
		case a.busy != b.busy:
			if !a.busy {
				return -1
			}
			return 1
		case a.lastUsed.Before(b.lastUsed):
			return -1
		case b.lastUsed.Before(a.lastUsed):
			return 1
		}
		return 0
	})
	total := s.budget.retained.Load()
	var out []*Session
	forBytes := 0
	for i, c := range all {
		overCount := len(all)-i > keep
		overBytes := goal >= 0 && total > goal
		if !overCount && !overBytes {
			break
		}
		if !overCount {
			forBytes++
		}
		delete(s.byID, c.s.id)
		delete(s.sessions, c.s)
		// Out of the total at once, so that the next admission does
		// not evict for bytes that are on their way out (Close, once
		// s.mu is released, takes out what it gains meanwhile).
		c.s.mu.Lock()
		c.s.bytes.release()
		c.s.mu.Unlock()
		out = append(out, c.s)
		total -= c.bytes
	}
	return out, forBytes
}

// ExpireIdle closes the HTTP sessions unused for longer than idle as of
// now (a session with a GET stream open counts as used), and returns how
// many.
func (s *Server) ExpireIdle(now time.Time, idle time.Duration) int {
	s.mu.Lock()
	var old []*Session
	for _, sess := range s.byID {
		sess.mu.Lock()
		if now.Sub(sess.lastUsed) > idle {
			old = append(old, sess)
		}
		sess.mu.Unlock()
	}
	s.mu.Unlock()
	for _, sess := range old {
		sess.Close()
	}
	if p, ok := s.seal.Store.(SessionStorePruner); ok && s.sealer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.seal.StoreTimeout)
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
func (s *Server) serveGet(w http.ResponseWriter, r *http.Request) {
	last := r.Header.Get(HeaderLastEventID)
	if !s.servesHandshake() || protocol.UsesDiscover(strings.TrimSpace(r.Header.Get(HeaderProtocolVersion))) ||
		(s.opts.HTTP.NoGetStream && last == "") {
		w.Header().Set("Allow", "POST, DELETE")
		httpError(w, http.StatusMethodNotAllowed, "method not allowed: no standalone stream (the stateless era has none)")
		return
	}
	sess := s.requestSession(w, r)
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
		s.streamsRefused.Add(1)
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
	err := s.pump(r.Context(), w, st, after, nil, keepalive, sess.touch)
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
func (s *Server) pollAfter(sess *Session, m *protocol.Message, sse, skip bool) time.Duration {
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
func (s *Server) serveDelete(w http.ResponseWriter, r *http.Request) {
	if !s.servesHandshake() || protocol.UsesDiscover(strings.TrimSpace(r.Header.Get(HeaderProtocolVersion))) {
		w.Header().Set("Allow", "POST")
		httpError(w, http.StatusMethodNotAllowed, "method not allowed: no sessions (the stateless era has none)")
		return
	}
	if sess := s.requestSession(w, r); sess != nil {
		if sess.sealed != nil {
			if err := s.deleteSealed(r.Context(), sess); err != nil {
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
func (s *Server) requestSession(w http.ResponseWriter, r *http.Request) *Session {
	sid := r.Header.Get(HeaderSessionID)
	if sid == "" {
		rpcError(w, http.StatusBadRequest, protocol.ID{}, protocol.NewError(protocol.CodeInvalidRequest, "Bad Request: the %s header is required", HeaderSessionID))
		return nil
	}
	sess, err := s.sessionFor(r.Context(), sid)
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

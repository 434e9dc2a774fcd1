package mcpserver

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// sessionKind says what a Session is.
type sessionKind uint8

const (
	kindHTTP    sessionKind = iota + 1 // a Streamable HTTP session (Mcp-Session-Id)
	kindConn                           // a connection: stdio, or one served by ServeConn
	kindRequest                        // one stateless-era HTTP request
)

// Session is one client: a Streamable HTTP session (Mcp-Session-Id), a
// connection (stdio, or one served by ServeConn), or a single
// stateless-era HTTP request, which has no channel of its own.
//
// A session has a channel for the notifications and requests that belong
// to no request (list_changed, log messages, a server's requests outside
// a call): the connection itself, or for an HTTP session its standalone
// event stream, which its GET streams read (and replay after
// Last-Event-ID).
//
// Concurrency: safe for concurrent use. The fields above mu never change;
// mu guards the rest.
type Session struct {
	srv  *Server
	id   string      // the Mcp-Session-Id of an HTTP session; "" otherwise
	kind sessionKind //
	conn *connection // kindConn: the connection
	log  *stream     // kindHTTP: the standalone stream's events
	done chan struct{}

	mu          sync.Mutex
	closed      bool
	expiring    bool   // Expire was called: it closes once nothing is in flight
	version     string // negotiated (initialize) or the last stateless-era request's
	modern      bool   // speaks the stateless era
	initialized bool   // notifications/initialized received
	clientInfo  protocol.Implementation
	caps        protocol.ClientCapabilities
	meta        *Meta                     // the last stateless-era request's (connections)
	logLevel    protocol.LoggingLevel     // "" until logging/setLevel
	subs        map[string]struct{}       // resource subscriptions (nil until one)
	inflight    map[protocol.ID]*exchange // requests being served, by id (not those of Options.Inline)
	listens     map[protocol.ID]*listener // open subscriptions/listen requests, by id
	lastUsed    time.Time
	// sealed is what the session's sealed id carries (HTTPOptions.Seal);
	// nil when ids are not sealed. It never changes once set.
	sealed    *SealedSession
	checkedAt time.Time // when the SessionStore was last asked whether the session was deleted
	bytes     held      // what the session is counted for in the Server's budget (see bounds.go)

	// Components with locks of their own, taken after mu if at all.
	asks    asks        // requests sent to the client, waiting for their answers (ask.go)
	streams httpStreams // an HTTP session's POST and GET streams
}

// maxPostStreams bounds the resumable POST streams a session keeps.
const maxPostStreams = 256

func newSession(srv *Server, kind sessionKind) *Session {
	return &Session{srv: srv, kind: kind, done: make(chan struct{}), lastUsed: srv.opts.Now(), bytes: held{b: &srv.budget},
		asks: asks{seq: &srv.askSeq}, streams: httpStreams{outbox: srv.opts.HTTP.OutboxSize}}
}

// newSessionID returns a random session id (128 bits, hex).
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ID returns the Mcp-Session-Id of an HTTP session; "" for a connection or
// a stateless-era request.
func (s *Session) ID() string { return s.id }

// Done is closed when the session closes.
func (s *Session) Done() <-chan struct{} { return s.done }

// Closed reports whether the session has closed.
func (s *Session) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Flush writes now what a connection's session holds back (the answers
// to messages read together are written together); a handler that is
// about to block its connection's reader calls it. Other sessions hold
// nothing back.
func (s *Session) Flush() {
	if s.conn != nil {
		s.conn.flush()
	}
}

// Client is what a session knows of its client.
type Client struct {
	// Version is the session's protocol version: negotiated by
	// initialize, or named by its latest stateless-era request ("" before
	// either).
	Version string
	// Modern reports whether the session speaks the stateless era.
	Modern bool
	// Initialized reports whether the session is in a handshake era and
	// its initialize was answered.
	Initialized bool
	// Info is the client's name and version, and Capabilities its
	// capabilities: from initialize, or from the latest stateless-era
	// request's _meta.
	Info         protocol.Implementation
	Capabilities protocol.ClientCapabilities
	// LogLevel is the level the client set with logging/setLevel ("" if
	// it did not).
	LogLevel protocol.LoggingLevel
}

// Client returns what the session knows of its client, read together.
func (s *Session) Client() Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := Client{Version: s.version, Modern: s.modern, Initialized: !s.modern && (s.initialized || s.version != ""),
		Info: s.clientInfo, Capabilities: s.caps, LogLevel: s.logLevel}
	if s.meta != nil {
		c.Info, c.Capabilities = s.meta.ClientInfo, s.meta.ClientCapabilities
	}
	return c
}

// LastActive returns when the session last sent something (or had a GET
// stream open).
func (s *Session) LastActive() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastUsed
}

// Reachable reports whether something sent on the session's channel
// reaches the client now: a connection, or an HTTP session with a GET
// stream open.
func (s *Session) Reachable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return false
	case s.kind == kindConn:
		return true
	case s.kind == kindHTTP:
		return s.streams.open() > 0
	}
	return false
}

// Busy reports whether the session has a request in flight or a stream
// open.
func (s *Session) Busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight) > 0 || len(s.listens) > 0 || s.streams.open() > 0
}

// Subscribe records that the client wants notifications/resources/updated
// for uri (a handler serving resources/subscribe calls it). It fails with
// ErrSessionClosed when the session has closed, and with a
// *protocol.Error of code CodeSessionStateTooLarge (to answer the
// request with) when the URI would pass Options.MaxSessionState or
// Options.MaxRetained; then nothing is recorded. A URI subscribed
// already is not counted twice.
func (s *Session) Subscribe(uri string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrSessionClosed
	}
	if _, ok := s.subs[uri]; !ok {
		if perr := s.bytes.charge(s.closed, protocol.MethodResourcesSubscribe, uriSize(uri)); perr != nil {
			s.mu.Unlock()
			return perr
		}
		if s.subs == nil {
			s.subs = map[string]struct{}{}
		}
		s.subs[uri] = struct{}{}
	}
	s.mu.Unlock()
	s.saveExtras()
	return nil
}

// CheckSubscribe reports, as Subscribe would, whether uri may be
// subscribed now, without recording it: a handler calls it before it
// does anything for a subscription (Subscribe, after, decides).
func (s *Session) CheckSubscribe(uri string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrSessionClosed
	}
	if _, ok := s.subs[uri]; ok {
		return nil
	}
	n := uriSize(uri)
	if perr := s.bytes.check(protocol.MethodResourcesSubscribe, n); perr != nil {
		return perr
	}
	srv := s.srv
	if srv.budget.maxRetained > 0 && srv.budget.retained.Load()+n > srv.budget.maxRetained {
		srv.budget.retainedRefused.Add(1)
		return stateError(protocol.MethodResourcesSubscribe, boundTotal, srv.budget.maxRetained, srv.budget.retained.Load()+n)
	}
	return nil
}

// Unsubscribe forgets a subscription Subscribe recorded.
func (s *Session) Unsubscribe(uri string) {
	s.mu.Lock()
	if _, ok := s.subs[uri]; ok {
		delete(s.subs, uri)
		_ = s.bytes.charge(s.closed, protocol.MethodResourcesUnsubscribe, -uriSize(uri))
	}
	s.mu.Unlock()
	s.saveExtras()
}

// Subscribed reports whether the client subscribed to uri.
func (s *Session) Subscribed(uri string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.subs[uri]
	return ok
}

// Subscriptions returns the URIs the client subscribed to.
func (s *Session) Subscriptions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.subs))
	for uri := range s.subs {
		out = append(out, uri)
	}
	return out
}

// Notify sends a notification on the session's channel. It reports
// whether it was sent: a stateless-era request's session has no channel,
// and a closed session sends nothing.
func (s *Session) Notify(method string, params any) bool {
	frame, err := notification(method, params)
	if err != nil {
		s.srv.log.Debug().Err(err).Str("method", method).Msg("encoding a notification")
		return false
	}
	return s.send(frame)
}

// send writes frame on the session's channel.
func (s *Session) send(frame []byte) bool {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return false
	}
	switch s.kind {
	case kindConn:
		return s.conn.write(frame) == nil
	case kindHTTP:
		s.log.push(event{data: frame})
		return true
	}
	return false
}

// takesNotifications reports whether the session gets the notifications
// that belong to no request (list_changed, resources/updated, log
// messages): a handshake-era session once initialized, with a channel,
// not closed. A stateless-era client gets them through
// subscriptions/listen only.
func (s *Session) takesNotifications() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.expiring || s.kind == kindRequest || len(s.listens) > 0 {
		return false
	}
	if s.modern {
		return s.kind == kindConn && s.srv.opts.ModernConnNotifications
	}
	return s.initialized || s.version != ""
}

// touch records activity.
func (s *Session) touch() {
	now := s.srv.opts.Now()
	s.mu.Lock()
	s.lastUsed = now
	s.mu.Unlock()
}

// begin registers request x as in flight, for notifications/cancelled and
// Close; false when the session has closed.
func (s *Session) begin(x *exchange) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.expiring {
		return false
	}
	if s.inflight == nil {
		s.inflight = map[protocol.ID]*exchange{}
	}
	s.inflight[x.req.ID] = x
	return true
}

// end unregisters request x; an expiring session with nothing left in
// flight closes.
func (s *Session) end(x *exchange) {
	s.mu.Lock()
	if s.inflight[x.req.ID] == x {
		delete(s.inflight, x.req.ID)
	}
	closeNow := s.expiring && !s.closed && len(s.inflight) == 0
	s.mu.Unlock()
	if closeNow {
		s.Close()
	}
}

// Expire ends the session gracefully: it is forgotten at once (an HTTP
// session's next request gets 404; it gets no more notifications) and
// takes no new request, and it closes (see Close) once the requests in
// flight have been answered. (Requests of a connection served with
// Options.Inline are not waited for.)
func (s *Session) Expire() {
	s.mu.Lock()
	if s.closed || s.expiring {
		s.mu.Unlock()
		return
	}
	s.expiring = true
	idle := len(s.inflight) == 0
	s.mu.Unlock()
	if s.kind != kindRequest {
		s.srv.table.forget(s)
	}
	if idle {
		s.Close()
	}
}

// cancelRequest ends the request id (notifications/cancelled): an
// exchange in flight is abandoned, a listen stream ends without an
// answer. It reports whether there was one.
func (s *Session) cancelRequest(id protocol.ID) bool {
	s.mu.Lock()
	x := s.inflight[id]
	delete(s.inflight, id)
	l := s.listens[id]
	s.mu.Unlock()
	if x != nil {
		x.abandon()
	}
	if l != nil {
		l.end(false)
	}
	return x != nil || l != nil
}

// Close ends the session: its requests in flight are cancelled (and not
// answered), its listen streams end, the requests it was asked are
// failed with ErrSessionClosed, its streams end once they have sent what
// they hold, and an HTTP session's next request gets 404; a connection
// stops being served. Options.OnSessionClosed is called. Close is
// idempotent.
func (s *Session) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	s.bytes.release()
	inflight := s.inflight
	s.inflight = nil
	listens := make([]*listener, 0, len(s.listens))
	for _, l := range s.listens {
		listens = append(listens, l)
	}
	s.mu.Unlock()
	for _, x := range inflight {
		x.abandon()
	}
	for _, l := range listens {
		l.end(false)
	}
	if s.log != nil {
		s.log.end()
	}
	s.streams.close()
	if s.conn != nil {
		s.conn.close()
	}
	if s.kind != kindRequest {
		s.srv.table.forget(s)
		if s.srv.opts.OnSessionClosed != nil {
			s.srv.opts.OnSessionClosed(s)
		}
	}
}

// httpStreams are an HTTP session's resumable POST streams
// (HTTPOptions.SSEResponses) and the count of its GET streams open.
//
// Concurrency: guarded by mu, which is taken after the session's own
// (never the other way round).
type httpStreams struct {
	outbox int // HTTPOptions.OutboxSize

	mu        sync.Mutex
	closed    bool               // the session closed: new streams are born ended
	posts     map[uint32]*stream // by number
	postOrder []uint32           // their numbers, oldest first
	postSeq   uint32             // number of the newest POST stream
	gets      int                // GET streams open
	// foreign: the session was restored from its id, and the client's
	// Last-Event-ID on the standalone stream numbers events of another
	// replica (or life) until a GET stream opens here.
	foreign bool
}

// newPost returns a new resumable POST stream, keeping the newest
// maxPostStreams.
func (h *httpStreams) newPost(forgetOnRead bool) *stream {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.postSeq++
	st := newStream(h.postSeq, h.outbox)
	st.forgetOnRead = forgetOnRead
	if h.posts == nil {
		h.posts = map[uint32]*stream{}
	}
	h.posts[st.no] = st
	h.postOrder = append(h.postOrder, st.no)
	if len(h.postOrder) > maxPostStreams {
		delete(h.posts, h.postOrder[0])
		h.postOrder = h.postOrder[1:]
	}
	if h.closed {
		st.end()
	}
	return st
}

// forget forgets POST stream st: no GET resumes it any more.
func (h *httpStreams) forget(st *stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.posts[st.no] != st {
		return
	}
	delete(h.posts, st.no)
	if i := slices.Index(h.postOrder, st.no); i >= 0 {
		h.postOrder = slices.Delete(h.postOrder, i, i+1)
	}
}

// post returns POST stream number no, or nil.
func (h *httpStreams) post(no uint32) *stream {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.posts[no]
}

// openGet counts a GET stream in, unless limit are open already (limit ≤
// 0: no limit); closeGet counts it out; open says how many are.
func (h *httpStreams) openGet(limit int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if limit > 0 && h.gets >= limit {
		return false
	}
	h.gets++
	return true
}

func (h *httpStreams) closeGet() {
	h.mu.Lock()
	h.gets--
	h.mu.Unlock()
}

func (h *httpStreams) open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gets
}

// takeForeign reports whether the session was restored from its sealed
// id and has had no GET stream here yet (the client's event numbers are
// then another replica's), and from now on reports false.
func (h *httpStreams) takeForeign() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.foreign
	h.foreign = false
	return f
}

// close ends every POST stream once it has sent what it holds; streams
// made later are born ended.
func (h *httpStreams) close() {
	h.mu.Lock()
	h.closed = true
	posts := make([]*stream, 0, len(h.posts))
	for _, st := range h.posts {
		posts = append(posts, st)
	}
	h.mu.Unlock()
	for _, st := range posts {
		st.end()
	}
}

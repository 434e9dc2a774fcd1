package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// Errors of the requests a server sends its client (ResponseWriter.Ask,
// Session.Ask).
var (
	// ErrSessionClosed: the session closed before the client answered.
	ErrSessionClosed = errors.New("mcpserver: the session closed")
	// ErrUnreachable: nothing carries a request to the client: a
	// stateless-era request (that era asks with input_required), or an
	// HTTP session without a GET stream open.
	ErrUnreachable = errors.New("mcpserver: the client cannot be reached")
)

// Server is the server half of MCP. Create it with New; serve it with
// ServeStdio, ServeConn or HTTPHandler (all at once if need be); end it
// with Close.
//
// Concurrency: a Server is safe for concurrent use. mu guards the tables
// of sessions and listen streams; each Session guards its own state.
// Handlers run on the goroutines of the transports (see Options.Inline).
type Server struct {
	opts Options
	// eras are the versions served and the checks of each era
	// (immutable but for atomic memos).
	eras     eras
	dispatch Handler
	log      zerolog.Logger

	askSeq atomic.Uint64 // numbers the requests sent to clients

	cancelled atomic.Uint64

	// budget counts the bytes the sessions make the Server keep against
	// Options.MaxSessionState and Options.MaxRetained (atomic).
	budget budget

	// http serves Streamable HTTP (immutable after New but for atomic
	// counters; it runs on net/http's goroutines).
	http httpTransport
	// table is the sessions and listen streams open (guarded by its
	// lock, taken before any session's).
	table sessionTable
}

// New returns a Server with options o.
func New(o Options) *Server {
	o = o.withDefaults()
	s := &Server{
		opts: o,
		eras: eras{versions: slices.Clone(o.Versions)},
		log:  o.Logger,
	}
	s.table = sessionTable{log: o.Logger, budget: &s.budget, maxSessions: o.HTTP.MaxSessions,
		sessions: map[*Session]struct{}{}, byID: map[string]*Session{}, listens: map[*listener]struct{}{},
		closing: make(chan struct{})}
	s.http.srv = s
	s.budget.maxState, s.budget.maxRetained = int64(max(o.MaxSessionState, 0)), max(o.MaxRetained, 0)
	if len(o.HTTP.Seal.Keys) > 0 {
		s.http.seal = o.HTTP.Seal.withDefaults()
		sealer, err := NewSealer(s.http.seal.Keys, s.http.seal.MaxAge)
		if err != nil {
			panic(err)
		}
		s.http.sealer = sealer
	}
	s.eras.budget = &s.budget
	for _, v := range s.eras.versions {
		if protocol.UsesDiscover(v) {
			s.eras.modern = true
		} else {
			s.eras.handshake = true
		}
	}
	var h Handler = HandlerFunc(s.core)
	for i := len(o.Middleware) - 1; i >= 0; i-- {
		h = o.Middleware[i](h)
	}
	s.dispatch = h
	return s
}

// Stats are counts of a Server's life.
type Stats struct {
	// Sessions are the sessions open: HTTP sessions and connections.
	Sessions int
	// Listens are the subscriptions/listen streams open.
	Listens int
	// SessionsEvicted counts the HTTP sessions evicted at
	// HTTPOptions.MaxSessions.
	SessionsEvicted uint64
	// StreamsRefused counts the GET streams refused at
	// HTTPOptions.MaxStreamsPerSession.
	StreamsRefused uint64
	// Cancelled counts the requests their client cancelled.
	Cancelled uint64
	// Polled counts the POST responses ended for the client to poll
	// (HTTPOptions.PollAfter).
	Polled uint64
	// Retained is the bytes the sessions hold together, as
	// Options.MaxRetained counts them.
	Retained int64
	// MaxSessionState and MaxRetained are the byte bounds in force (0:
	// none).
	MaxSessionState, MaxRetained int64
	// StateRefused counts the requests refused at
	// Options.MaxSessionState; RetainedRefused those refused at
	// Options.MaxRetained.
	StateRefused, RetainedRefused uint64
	// EvictedForBytes counts the HTTP sessions evicted to stay within
	// Options.MaxRetained (they are counted in SessionsEvicted too).
	EvictedForBytes uint64
	// BodyTimeouts counts the POSTs whose body did not arrive within
	// HTTPOptions.BodyTimeout.
	BodyTimeouts uint64
}

// Stats returns the Server's counts.
func (s *Server) Stats() Stats {
	st := s.table.counts()
	st.StreamsRefused = s.http.streamsRefused.Load()
	st.Cancelled = s.cancelled.Load()
	st.Polled = s.http.polled.Load()
	st.Retained = s.budget.retained.Load()
	st.MaxSessionState, st.MaxRetained = s.budget.maxState, s.budget.maxRetained
	st.StateRefused, st.RetainedRefused = s.budget.stateRefused.Load(), s.budget.retainedRefused.Load()
	st.EvictedForBytes = s.budget.evictedForBytes.Load()
	st.BodyTimeouts = s.http.bodyTimeouts.Load()
	return st
}

// Sessions returns the open sessions that have a channel of their own:
// HTTP sessions and connections (not the sessions of single
// stateless-era requests).
func (s *Server) Sessions() []*Session { return s.table.snapshot() }

// Shutdown stops taking work: new HTTP requests get 503, every
// subscriptions/listen stream ends with its complete result, and the
// standalone GET streams end once they have sent what they hold.
// Requests in flight go on. It is idempotent.
func (s *Server) Shutdown() {
	sessions := s.table.shutdown()
	s.EndListens()
	for _, sess := range sessions {
		if sess.log != nil {
			sess.log.end()
		}
	}
}

// Close shuts the Server down (see Shutdown) and closes every session:
// requests in flight are cancelled (and not answered), connections stop
// being served. It is idempotent.
func (s *Server) Close() {
	s.Shutdown()
	for _, sess := range s.table.snapshot() {
		sess.Close()
	}
}

// DropSessions forgets every session at once, as a server that restarts
// would: their streams end without sending what they hold, listen
// streams end without an answer, requests in flight are cancelled, and
// the next request of an HTTP session gets 404.
func (s *Server) DropSessions() {
	sessions, listens := s.table.snapshot(), s.table.listeners()
	for _, l := range listens {
		l.end(false)
	}
	for _, sess := range sessions {
		if sess.log != nil {
			sess.log.cut()
		}
		sess.Close()
	}
}

// serveRequest checks the era of request x and dispatches it.
func (s *Server) serveRequest(x *exchange) {
	x.req.Session.touch()
	if perr := s.checkEra(&x.req); perr != nil {
		x.Error(perr)
		return
	}
	s.dispatch.ServeMCP(x.ctx, x, &x.req)
}

// checkEra decides the era of request r (see era.go) and refuses what
// that era does not allow; for a stateless-era request on a connection
// it validates the _meta and sets r.Meta.
func (s *Server) checkEra(r *Request) *protocol.Error {
	sess := r.Session
	if sess.kind == kindRequest { // an HTTP request of the stateless era: validated with its headers
		if RemovedInStateless(r.Method) {
			return removedError(r.Method)
		}
		return nil
	}
	if r.Method == protocol.MethodDiscover {
		return nil // either era; discover checks its version itself
	}
	sess.mu.Lock()
	modern, inited, initialized := sess.modern, sess.version != "" || sess.initialized, sess.initialized
	sess.mu.Unlock()
	if inited && !modern {
		if s.opts.RequireInitialized && !initialized && r.Method != protocol.MethodInitialize && r.Method != protocol.MethodPing {
			return protocol.NewError(protocol.CodeInvalidRequest, "%s before initialization: send notifications/initialized first", r.Method)
		}
		return nil
	}
	if !modern {
		if _, ok := metaVersion(r.Params); !ok || !s.eras.modern {
			if r.Method == protocol.MethodInitialize || r.Method == protocol.MethodPing {
				return nil
			}
			return protocol.NewError(protocol.CodeInvalidRequest, "%s before initialization: send initialize (or server/discover) first", r.Method)
		}
	}
	if RemovedInStateless(r.Method) {
		return removedError(r.Method)
	}
	meta, perr := s.eras.parseMeta(r.Params)
	if perr == nil {
		perr = s.eras.checkVersion(meta.Version)
	}
	if perr != nil {
		return perr
	}
	sess.mu.Lock()
	if perr := sess.bytes.setInit(sess.closed, r.Method, meta.size); perr != nil {
		sess.mu.Unlock()
		return perr
	}
	sess.modern, sess.version, sess.meta = true, meta.Version, meta
	sess.mu.Unlock()
	r.Meta = meta
	return nil
}

// ownMethod reports whether the Server answers method itself.
func ownMethod(method string) bool {
	switch method {
	case protocol.MethodInitialize, protocol.MethodDiscover, protocol.MethodPing, protocol.MethodLoggingSetLevel, protocol.MethodSubscriptionsListen:
		return true
	}
	return false
}

func removedError(method string) *protocol.Error {
	return protocol.NewError(protocol.CodeMethodNotFound, "method not found: %s (not in protocol version %s)", method, protocol.Version20260728)
}

// core answers the Server's own methods and hands the rest to the
// Handler. It is the innermost Handler of the dispatch.
func (s *Server) core(ctx context.Context, w ResponseWriter, r *Request) {
	switch r.Method {
	case protocol.MethodInitialize:
		s.initialize(w, r)
	case protocol.MethodDiscover:
		s.discover(w, r)
	case protocol.MethodPing:
		w.Reply(protocol.ValidJSON(`{}`))
	case protocol.MethodLoggingSetLevel:
		var p protocol.SetLevelParams
		if err := json.Unmarshal(r.Params, &p); err != nil || levelRank(p.Level) < 0 {
			w.Error(protocol.NewError(protocol.CodeInvalidParams, "logging/setLevel: want a level debug … emergency"))
			return
		}
		r.Session.mu.Lock()
		r.Session.logLevel = p.Level
		r.Session.mu.Unlock()
		r.Session.saveExtras()
		w.Reply(protocol.ValidJSON(`{}`))
	case protocol.MethodSubscriptionsListen:
		s.listen(ctx, w, r)
	default:
		s.opts.Handler.ServeMCP(ctx, w, r)
	}
}

// capabilities returns what the server declares in answer to r.
func (s *Server) capabilities(r *Request) protocol.ServerCapabilities {
	if s.opts.Capabilities != nil {
		return s.opts.Capabilities(r)
	}
	return protocol.ServerCapabilities{Tools: &protocol.ListChangedCapability{ListChanged: true}}
}

// initialize answers the handshake with the version negotiate picks.
func (s *Server) initialize(w ResponseWriter, r *Request) {
	var p protocol.InitializeParams
	if err := json.Unmarshal(r.Params, &p); err != nil {
		w.Error(protocol.NewError(protocol.CodeInvalidParams, "initialize: %v", err))
		return
	}
	version := s.eras.negotiate(p.ProtocolVersion)
	sess := r.Session
	sess.mu.Lock()
	if perr := sess.bytes.setInit(sess.closed, r.Method, initStateSize(r.Params)); perr != nil {
		sess.mu.Unlock()
		w.Error(perr)
		return
	}
	sess.version, sess.clientInfo, sess.caps = version, p.ClientInfo, p.Capabilities
	sess.mu.Unlock()
	s.log.Debug().Str("session", sessionTag(sess.id)).Str("client", p.ClientInfo.Name).Str("version", version).Msg("session initialized")
	w.Reply(protocol.InitializeResult{
		ProtocolVersion: version,
		Capabilities:    s.capabilities(r),
		ServerInfo:      s.opts.Info,
		Instructions:    s.opts.Instructions,
	})
}

// discover answers server/discover (2026-07-28).
func (s *Server) discover(w ResponseWriter, r *Request) {
	if !s.eras.modern {
		w.Error(protocol.NewError(protocol.CodeMethodNotFound, "method %q not found", r.Method))
		return
	}
	if r.Meta == nil {
		version, _ := metaVersion(r.Params)
		if perr := s.eras.checkVersion(version); perr != nil {
			w.Error(perr)
			return
		}
		meta, perr := s.eras.parseMeta(r.Params)
		if perr != nil {
			w.Error(perr)
			return
		}
		r.Meta = meta
	}
	versions := s.eras.modernVersions()
	if s.opts.DiscoverAllVersions {
		versions = s.eras.versions
	}
	res := protocol.DiscoverResult{
		SupportedVersions: versions,
		Capabilities:      s.capabilities(r),
		Instructions:      s.opts.Instructions,
		Meta:              protocol.Meta{},
	}
	_ = res.Meta.Set(protocol.MetaServerInfo, s.opts.Info)
	w.Reply(res)
}

// handleNotification handles a client's notification: those the Server
// knows, then the Handler's, if it wants them.
func (s *Server) handleNotification(ctx context.Context, sess *Session, m *protocol.Message) {
	switch m.Method {
	case protocol.NotificationInitialized:
		sess.mu.Lock()
		sess.initialized = true
		sess.mu.Unlock()
	case protocol.NotificationCancelled:
		var p protocol.CancelledParams
		if json.Unmarshal(m.Params, &p) == nil && sess.cancelRequest(p.RequestID) {
			s.cancelled.Add(1)
		}
	}
	if nh, ok := s.opts.Handler.(NotificationHandler); ok {
		nh.HandleNotification(ctx, sess, m.Method, m.Params)
	}
}

// handleResponse delivers a client's answer to a request the server sent.
func (s *Server) handleResponse(sess *Session, m *protocol.Message) {
	if !sess.asks.deliver(m) {
		s.log.Debug().Str("id", m.ID.String()).Msg("a response to no request of ours")
	}
}

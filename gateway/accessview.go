package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"sync"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/channels"
	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// What a caller under access rules (Options.Access, with the identities
// of Options.ResourceServer or of the host's own middleware) sees beyond
// tools/list and the calls that admit checks (accessgate.go): the
// notifications sent for no request, the admin API, and the Parts'
// views (View; the dashboard). Every surface answers from the caller's
// Identity with the same rules as tools/list: a server's prompts,
// resources, templates, completions, tasks, skills, log messages,
// resource updates, channel messages and events reach only a caller the
// rules let use that server; the gateway-wide figures (sessions, calls
// in flight, layer files skipped, the channel queue's totals) only a
// caller no rule restricts. A request outside its rules is refused as a
// tool call is: CodeAccessDenied over MCP, 403 over HTTP.

// accessView is what each caller sees of the gateway beyond tools/list
// and the calls admit checks: who gets a notification sent for no
// request (audience, listAudience), the sessions bound to their caller
// (callers, sessionBound), the filters of channels, skills, completions
// and subscriptions, the task ids' owner tags, and the status a
// restricted caller gets.
//
// Concurrency: safe for concurrent use by the requests' goroutines and
// Run's: callers has its own lock; the other fields are set by New and
// only read after.
type accessView struct {
	gate    *accessGate
	front   *front   // its resource server (front.rs): the rules may apply
	metrics *metrics // counts the refused session requests
	// callers are the callers of the handshake-era sessions, for the
	// notifications under access rules.
	callers sessionCallers
	// taskKey is the key of the task ids' owner tags.
	taskKey []byte
}

// sessionCallers remembers who each handshake-era session's caller is,
// for the notifications sent for no request (which have no request
// context of their own): the identity of the session's first request
// that carried one (its initialize over HTTP). A session without one
// (stdio, HTTP without authentication) is the anonymous caller. Listen
// streams need no entry: their own request's context carries the
// identity (mcpserver.Audience). A session is its caller's: a request of
// another caller on it (another subject or client) is refused,
// CodeAccessDenied over MCP (record) and 403 for its GET stream or
// DELETE (accessView.sessionBound).
//
// Concurrency: safe for concurrent use; mu guards byS. Entries are added
// by the requests' goroutines (the record middleware) and removed when
// the session closes (OnSessionClosed).
type sessionCallers struct {
	mu  sync.Mutex
	byS map[*mcpserver.Session]context.Context // guarded by mu
}

// record is the middleware that notes the caller of each handshake-era
// session that carries an identity, and refuses a request of another
// caller on a session already noted.
func (sc *sessionCallers) record(next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		if r.Meta == nil && r.Session != nil {
			if _, ok := IdentityFrom(ctx); ok && !sc.note(r.Session, ctx) {
				e := errorf(CodeAccessDenied, "%v: this session belongs to another caller", ErrAccessDenied)
				e.Data, _ = json.Marshal(map[string]any{"reason": "session"})
				w.Error(e)
				return
			}
		}
		next.ServeMCP(ctx, w, r)
	})
}

// note records ctx's caller as s's, unless s has one already; it reports
// whether s is ctx's caller's (false: another caller's).
func (sc *sessionCallers) note(s *mcpserver.Session, ctx context.Context) bool {
	sc.mu.Lock()
	if known, ok := sc.byS[s]; ok {
		sc.mu.Unlock()
		return sameCaller(known, ctx)
	}
	if sc.byS == nil {
		sc.byS = map[*mcpserver.Session]context.Context{}
	}
	sc.byS[s] = callerContext(ctx)
	sc.mu.Unlock()
	if s.Closed() { // closed meanwhile: OnSessionClosed may have run first
		sc.forget(s)
	}
	return true
}

// sameCaller reports whether a and b carry the same caller: the same
// subject and client, both the operator or neither.
func sameCaller(a, b context.Context) bool {
	return ownerOf(a) == ownerOf(b) && (a.Value(operatorKey{}) != nil) == (b.Value(operatorKey{}) != nil)
}

// ownedByOther reports whether the session with HTTP session id sid is
// noted as another caller's than ctx's.
func (sc *sessionCallers) ownedByOther(sid string, ctx context.Context) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for s, known := range sc.byS {
		if s.ID() == sid {
			return !sameCaller(known, ctx)
		}
	}
	return false
}

// sessionBound refuses (403) the GET stream or DELETE of an HTTP session
// by another caller than the session's (sessionCallers); POSTs are
// judged per request by the record middleware.
func (v *accessView) sessionBound(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
				if _, ok := IdentityFrom(r.Context()); ok && v.callers.ownedByOther(sid, r.Context()) {
					v.metrics.rejected.Add(1)
					httpError(w, http.StatusForbidden, "forbidden: "+ErrAccessDenied.Error()+": this session belongs to another caller")
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// forget drops s's entry (OnSessionClosed).
func (sc *sessionCallers) forget(s *mcpserver.Session) {
	sc.mu.Lock()
	delete(sc.byS, s)
	sc.mu.Unlock()
}

// of returns the context of s's caller (the anonymous caller's when
// none was recorded).
func (sc *sessionCallers) of(s *mcpserver.Session) context.Context {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if ctx, ok := sc.byS[s]; ok {
		return ctx
	}
	return context.Background()
}

// owned counts the open sessions whose caller is owner (ownerOf).
func (sc *sessionCallers) owned(owner string) int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	n := 0
	for s, ctx := range sc.byS {
		if ownerOf(ctx) == owner && !s.Closed() {
			n++
		}
	}
	return n
}

// callerContext returns a context carrying only what the access rules
// read of ctx (its Identity, and the operator's mark), detached from
// ctx's deadline and cancellation.
func callerContext(ctx context.Context) context.Context {
	out := context.Background()
	if id, ok := IdentityFrom(ctx); ok {
		out = WithIdentity(out, id)
	}
	if ctx.Value(operatorKey{}) != nil {
		out = context.WithValue(out, operatorKey{}, true)
	}
	return out
}

// rulesApply reports whether any caller may be restricted: there are
// access rules, or a resource server (whose identities the rules, when
// set later by SetAccess, judge). Without either every surface is the
// whole gateway's.
func (v *accessView) rulesApply() bool {
	return v.gate.policy.Load() != nil || v.front.rs != nil
}

// audience returns the recipients of a notification about server: the
// sessions and listen streams whose caller may use it (nil: everyone,
// when no rule applies).
func (v *accessView) audience(server string) mcpserver.Audience {
	if !v.rulesApply() {
		return nil
	}
	return func(s *mcpserver.Session, listen context.Context) bool {
		ctx := listen
		if ctx == nil {
			ctx = v.callers.of(s)
		}
		c := v.gate.callerOf(ctx)
		return c.anything || c.grant.Server(server)
	}
}

// View is what one caller may see of the gateway under the access rules
// (Options.Access): the servers and tools, the events, the status, and
// whether it may use the admin actions. A Part (the dashboard) shows each
// request's caller its View. A View is for one request: it holds the
// caller's grant and the name index of the moment.
//
// Concurrency: immutable; safe for concurrent use.
type View struct {
	g        *Gateway
	ctx      context.Context
	c        caller
	operator bool
	idx      *nameIndex
}

// ViewOf returns the View of ctx's caller (IdentityFrom; the anonymous
// caller without one).
func (g *Gateway) ViewOf(ctx context.Context) *View {
	return &View{g: g, ctx: ctx, c: g.gate.callerOf(ctx), operator: ctx.Value(operatorKey{}) != nil, idx: g.naming.current()}
}

// View returns the View of r's caller: the Identity the gateway's checks
// found for it (an access token), the operator for the static token
// (and a Part's login in exchange for it) beside a resource server.
func (s *Site) View(r *http.Request) *View { return s.g.ViewOf(r.Context()) }

// All reports whether no rule restricts the caller: there are none, or
// it is the operator (the static token beside a resource server).
func (v *View) All() bool { return v.c.anything || v.operator }

// Server reports whether the caller may use the server named name ("":
// the host's own tools, prompts and resources).
func (v *View) Server(name string) bool { return v.All() || v.c.grant.Server(name) }

// Tool reports whether the caller may see and call pool tool t (as
// tools/list: the access rules; Options.Allow and Deny are Offered's).
func (v *View) Tool(t mcpvisor.Tool) bool {
	return v.All() || v.g.gate.toolFor(&v.c, v.idx, t.Name)
}

// Event reports whether the caller may see ev: an event of a server it
// may use, or of no one server (a gap).
func (v *View) Event(ev mcpvisor.Event) bool {
	if v.All() {
		return true
	}
	s := ev.Header().Server
	return s == "" || v.c.grant.Server(s)
}

// Admin reports whether the caller may use the admin actions (reconnect,
// toggle, log in, reload, answer a permission request, /metrics): no
// rule restricts it; or it holds the resource server's admin scope (when
// there is one) and, once a rule sets admin, such a rule matches it.
func (v *View) Admin() bool {
	if v.All() || v.c.admin {
		return true
	}
	if v.c.gated {
		return false
	}
	rs := v.g.front.rs
	if rs == nil {
		return true
	}
	id, _ := IdentityFrom(v.ctx)
	return slices.Contains(id.Scopes, rs.AdminScope)
}

// Status is GET /status as the caller may see it (Gateway.StatusFor).
func (v *View) Status() StatusReport { return v.g.StatusFor(v.ctx) }

// Summary is Site.Summary as the caller may see it: the gateway-wide
// figures for a caller no rule restricts; for another, the count and
// token estimate of the tools it may use, its own sessions, and no
// calls in flight.
func (v *View) Summary() StatusReport {
	rep := v.g.site.Summary()
	if v.All() {
		return rep
	}
	mine := v.g.StatusFor(v.ctx)
	rep.Tools, rep.ToolTokens, rep.Sessions, rep.InFlight = mine.Tools, mine.ToolTokens, mine.Sessions, mine.InFlight
	return rep
}

// restrictStatus hides from rep (StatusFor's, of a restricted caller c)
// what is the whole gateway's: the sessions and calls in flight (it gets
// the count of its own sessions), the configuration's layer files that
// were skipped, and the channel queue's other servers and totals.
func (v *accessView) restrictStatus(ctx context.Context, c *caller, rep *StatusReport) {
	if ctx.Value(operatorKey{}) != nil {
		return
	}
	rep.Sessions = v.callers.owned(ownerOf(ctx))
	rep.InFlight = 0
	rep.Skipped = nil
	if ch := rep.Channels; ch != nil {
		mine := &ChannelReport{Capacity: ch.Capacity, Servers: []channels.ServerStats{}}
		for _, s := range ch.Servers {
			if c.grant.Server(s.Server) {
				mine.Servers = append(mine.Servers, s)
				mine.Received += s.Received
				mine.Taken += s.Taken
				mine.Dropped += s.Dropped
				mine.Queued += s.Queued
			}
		}
		rep.Channels = mine
	}
}

// channelFilter narrows f (wait_for_channel_message's own filter, may be
// nil) to the messages of the servers ctx's caller may use.
func (v *accessView) channelFilter(ctx context.Context, f channels.Filter) channels.Filter {
	c := v.gate.callerOf(ctx)
	if c.anything || ctx.Value(operatorKey{}) != nil {
		return f
	}
	return func(m channels.Message) bool { return c.grant.Server(m.Server) && (f == nil || f(m)) }
}

// refuseServer is the refusal of a request about a server ctx's caller
// may not use (CodeAccessDenied, as a tool's), or nil when it may.
func (v *accessView) refuseServer(ctx context.Context, what, server string) *protocol.Error {
	c := v.gate.callerOf(ctx)
	if c.anything || c.grant.Server(server) {
		return nil
	}
	return accessDenied(what, server)
}

// accessDenied is the CodeAccessDenied error of a request for what (of
// server) that the access rules refuse its caller.
func accessDenied(what, server string) *protocol.Error {
	e := errorf(CodeAccessDenied, "%v: %s is not allowed for this caller", ErrAccessDenied, what)
	e.Data, _ = json.Marshal(map[string]any{"reason": "access", "server": server})
	return e
}

// visibleURIs keeps of uris (a listen stream's resource subscriptions)
// those of the servers ctx's caller may use.
func (v *accessView) visibleURIs(ctx context.Context, uris []string) []string {
	c := v.gate.callerOf(ctx)
	if c.anything || len(uris) == 0 {
		return uris
	}
	out := uris[:0:0]
	for _, u := range uris {
		if c.grant.Server(v.gate.serverOfURI(u)) {
			out = append(out, u)
		}
	}
	return out
}

// taskTag returns what binds the task ids ctx's caller sees to it (see
// tasks.go), or nil when no rule applies (the ids are then
// "<server>/<id>"): the tag of (server, id) is a MAC of the caller
// (ownerOf), the server and the server's task id under the gateway's
// task key, unpadded base64url (16 characters, no '/').
func (v *accessView) taskTag(ctx context.Context) func(server, id string) string {
	if !v.rulesApply() {
		return nil
	}
	owner := ownerOf(ctx)
	return func(server, id string) string {
		m := hmac.New(sha256.New, v.taskKey)
		for _, s := range []string{owner, server, id} {
			m.Write([]byte(s))
			m.Write([]byte{0})
		}
		return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:12])
	}
}

// newTaskKey returns the key of the task tags: derived from the first
// session seal key when there is one (the replicas that share the keys
// then honour each other's task ids), random otherwise.
func newTaskKey(seal mcpserver.SealOptions) []byte {
	if len(seal.Keys) > 0 {
		m := hmac.New(sha256.New, seal.Keys[0].Secret)
		m.Write([]byte("mcpvisor gateway task owner"))
		return m.Sum(nil)
	}
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// serverFilter returns what reports whether ctx's caller may use a
// server.
func (v *accessView) serverFilter(ctx context.Context) func(server string) bool {
	c := v.gate.callerOf(ctx)
	if c.anything {
		return func(string) bool { return true }
	}
	return c.grant.Server
}

// listChanges are the list_changed notifications due (Run's), by method,
// with the servers whose lists changed: their callers get it (a gap, or
// a change of no known server, goes to everyone: allServers).
//
// Concurrency: owned by Run's goroutine.
type listChanges map[string]map[string]bool

// allServers in a listChanges entry sends it to everyone.
const allServers = "\x00all"

// add notes that server's list of method changed.
func (lc listChanges) add(method, server string) {
	if lc[method] == nil {
		lc[method] = map[string]bool{}
	}
	lc[method][server] = true
}

// addAll notes a change of method for everyone.
func (lc listChanges) addAll(method string) { lc.add(method, allServers) }

// listAudience returns who gets a list_changed due for servers: the
// sessions and listen streams whose caller may use one of them (nil:
// everyone, when no rule applies or the change is everyone's).
func (v *accessView) listAudience(servers map[string]bool) mcpserver.Audience {
	if !v.rulesApply() || servers[allServers] {
		return nil
	}
	return func(s *mcpserver.Session, listen context.Context) bool {
		ctx := listen
		if ctx == nil {
			ctx = v.callers.of(s)
		}
		c := v.gate.callerOf(ctx)
		if c.anything {
			return true
		}
		for server := range servers {
			if c.grant.Server(server) {
				return true
			}
		}
		return false
	}
}

// Package gateway serves a pool as one MCP server: the downstream side
// of `mcpvisor supervise`, and what a host embeds to serve its own pool.
// Downstream clients (agent hosts) connect over stdio (ServeStdio) or
// Streamable HTTP (Handler, at /mcp, or the Serve convenience listener),
// see the aggregated tools, prompts and resources under their downstream
// names (NameStyle), and have their calls routed to the server behind
// each name by the Backend. Changes of the pool reach them as
// list_changed notifications.
//
// Embedding: New(backend, Options) over any Backend (*mcpvisor.Supervisor,
// or a cluster member: the package takes interfaces, and imports no
// cluster package); the host's own tools, resources and prompts in
// Options.Features, served beside the pool's; optional HTTP parts, such
// as the dashboard (package gateway/dashboard), in Options.Parts. The
// host then runs Run on a goroutine of its own, serves Handler (or
// Serve, ServeStdio), and ends with Drain and Close. Options' zero value
// serves every tool over loopback origins, with no token.
//
// Eras: the handshake eras (initialize, 2024-11-05 … 2025-11-25, with
// Mcp-Session-Id over HTTP) and the stateless era 2026-07-28
// (server/discover, per-request _meta, subscriptions/listen). The
// protocol itself (sessions, eras, streams, polling, bounds) is the
// shared package mcpserver's; the gateway is its Handler (server.go,
// handler.go) and keeps what is a gateway's: the pool as one server,
// calls routed to the Supervisor, the servers' requests asked of a
// client (upstream.go, mrtr.go), channels, tasks and skills passed on,
// caching hints (results.go), metrics and the admin API.
//
// The same listener serves the admin API (GET /status, /metrics, /events;
// see admin.go) and the Parts a host adds (Options.Parts: the dashboard
// of package gateway/dashboard, at / with its endpoints under /admin/).
//
// Concurrency: a Gateway is safe for concurrent use. Each downstream
// session is an mcpserver.Session, which guards its own state. The
// gateway's one job, serving the pool as one server, is split into
// parts with one job each, held in the Gateway's fields; each owns its
// state under its own lock (or holds none that changes after New):
//   - accessGate: who the caller is, what it may see and call (Allow,
//     Deny, the access rules) and its rate limit; the rules are an atomic
//     pointer (SetAccess), the limiter has its lock;
//   - accessView: what a caller sees beyond the lists (notification
//     audiences, sessions bound to their caller, filters, task tags);
//     sessionCallers has its lock;
//   - callRouter: the per-call path (tools/call, prompts/get,
//     resources/read); no state of its own;
//   - resultPages: results cut to fit and their pages (resultStore, its
//     lock);
//   - auditTrail: the audit entries (the Auditor takes concurrent
//     Records);
//   - the calls in flight (callTable), the input rounds (inputRounds),
//     the channel waits (channelWaits), the upstream resource
//     subscriptions (resourceSubs), the name index (namer), the pool's
//     lists (pool), search mode (searchMode), the start-up gate
//     (startupWait), the HTTP checks (front), the admin API (admin), and
//     the host's Features.
//
// The gateway's one event goroutine (Run) reads the Supervisor's event
// bus and fans out notifications (fanout), owning the list changes due
// (listChanges); it never blocks on a slow client (every session's
// stream is bounded and drops the oldest event). The bus subscription is
// taken by New, before any client can connect, so no event published
// while a client is connected is missed because Run had not subscribed
// yet.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/channels"
	"github.com/mcpvisor/mcpvisor/gateway/access"
	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Backend is what the gateway needs of a supervisor: the pool, calls, and
// the event bus. *mcpvisor.Supervisor implements it, and the optional
// interfaces below, which the gateway uses when a Backend implements them
// (cluster.Member implements Backend and UserAuthorizer). A server's
// requests to its client reach the gateway through a Forwarder.
type Backend interface {
	Tools() []mcpvisor.Tool
	CallTool(ctx context.Context, name string, args any) (*protocol.CallToolResult, error)
	Status() []mcpvisor.ServerStatus
	Subscribe(ctx context.Context, opts ...mcpvisor.SubscribeOption) <-chan mcpvisor.Event
}

// ProgressCaller is implemented by a Backend that can ask the server for
// progress reports of a call and pass them on (CallOptions.Progress).
// Without it, a downstream progress token is accepted and no progress is
// reported.
type ProgressCaller interface {
	CallToolWith(ctx context.Context, name string, args any, o mcpvisor.CallOptions) (*protocol.CallToolResult, error)
}

// PromptSource is implemented by a Backend that offers its servers'
// prompts. Without it, the gateway lists none and prompts/get is
// ErrUnknownPrompt.
type PromptSource interface {
	Prompts() mcpvisor.Prompts
}

// ResourceSource is implemented by a Backend that offers its servers'
// resources. The gateway subscribes a URI upstream while at least one
// downstream session (or listen stream) wants it. Without it, the gateway
// lists none and resources/read is ErrUnknownServer.
type ResourceSource interface {
	Resources() mcpvisor.Resources
}

// ServerSource is implemented by a Backend that can address one server:
// completions, its instructions, and the requests of the extensions the
// gateway passes on (tasks, skills); the dashboard's login, reconnect and
// toggle. Without it, those methods are not found, servers show no
// purpose, and the dashboard offers none of those actions.
type ServerSource interface {
	Server(name string) mcpvisor.Server
}

// listPrompts is b's prompts of every server: none when b offers none.
func listPrompts(b Backend) []mcpvisor.Prompt {
	src, ok := b.(PromptSource)
	if !ok {
		return nil
	}
	ps, _ := src.Prompts().List("")
	return ps
}

// listResources is b's resources and templates of every server: none
// when b offers none.
func listResources(b Backend) ([]mcpvisor.Resource, []mcpvisor.ResourceTemplate) {
	src, ok := b.(ResourceSource)
	if !ok {
		return nil, nil
	}
	rs, ts, _ := src.Resources().List("")
	return rs, ts
}

// Options configure a Gateway. The zero value serves every tool, with no
// token and loopback origins only.
type Options struct {
	// Logger receives the gateway's logs (never stdout).
	Logger zerolog.Logger
	// Version is reported as serverInfo.version.
	Version string
	// Allow and Deny filter the tools offered downstream by qualified
	// name (path.Match globs, e.g. "mcp__github__*"): a tool is offered
	// when it matches an Allow glob (or Allow is empty) and no Deny glob.
	// A denied tool is neither listed nor callable. (Each server's own
	// tools filter in the config applies before these.)
	Allow, Deny []string
	// Token, when set, is the bearer token every HTTP request (MCP and
	// admin) must carry.
	Token string
	// Access, when set, are the access rules and rate limits of the
	// callers (package gateway/access; see accessgate.go): each caller
	// lists and calls only what they let it use. SetAccess replaces them.
	Access *access.Policy
	// AccessNow is the clock of the rate limits (default time.Now).
	AccessNow func() time.Time
	// ResourceServer, when set, makes the gateway an OAuth 2.1 resource
	// server: access tokens validated for every HTTP request, the
	// protected resource metadata, scopes (resource.go). Token, when
	// also set, stays accepted.
	ResourceServer *ResourceServer
	// Names is the style of the names under which tools and prompts are
	// offered downstream; the zero value is NamesShort.
	Names NameStyle
	// NameBudget is the longest name NamesShort offers; zero means
	// DefaultNameBudget. A longer name is cut and given a hash suffix.
	NameBudget int
	// LocalOnly is set when the HTTP listener is on loopback: then every
	// request's Host header must name a loopback host (DNS rebinding
	// protection).
	LocalOnly bool
	// AllowedOrigins adds origins (scheme://host[:port]) that may call the
	// HTTP endpoints from a browser; loopback origins are always allowed.
	AllowedOrigins []string
	// SessionIdle ends an HTTP session unused for this long (default 1 h).
	SessionIdle time.Duration
	// OutboxSize bounds the notifications kept per session for its GET
	// stream (default 256; the oldest is dropped).
	OutboxSize int
	// MaxSessions caps the HTTP sessions kept at once (default
	// DefaultMaxSessions; negative: no cap). A new session over the cap
	// evicts the longest-idle one, whose next request gets 404 (the
	// client initializes a new session); evictions are counted in
	// /metrics.
	MaxSessions int
	// MaxSessionState bounds what one downstream client makes the
	// gateway keep for its session, in bytes: its clientInfo and
	// capabilities, resource subscriptions and listen filters (default
	// mcpserver.DefaultMaxSessionState, 64 KiB; negative: no bound). An
	// initialize (or a request) beyond it is refused with the JSON-RPC
	// error mcpserver.CodeSessionStateTooLarge, before a session is made
	// or anything subscribed.
	MaxSessionState int
	// MaxSessionMemory bounds what all sessions keep together, in bytes
	// (their state, and 2 KiB for each open session; default
	// mcpserver.DefaultMaxRetained, 64 MiB; negative: no bound). A new
	// HTTP session beyond it evicts the longest-idle sessions, as
	// MaxSessions does; a request of an open session beyond it is
	// refused with mcpserver.CodeSessionStateTooLarge. Both bounds and
	// what they refused or evicted are in /metrics.
	MaxSessionMemory int64
	// BodyTimeout bounds how long the body of a POST may take to arrive
	// once its headers have (default mcpserver.DefaultBodyTimeout, 30 s;
	// negative: no bound): a slower one is answered 408 and its
	// connection closed. The answer's stream is not bounded by it.
	BodyTimeout time.Duration
	// MaxStreamsPerSession caps the GET streams open at once on one
	// session (default DefaultMaxStreamsPerSession; negative: no cap);
	// one more is refused with 409. (A POST's answer stream lasts as
	// long as its request.)
	MaxStreamsPerSession int
	// MaxCacheTTL caps the ttlMs of the caching hints the gateway gives
	// clients of the stateless era (default 5 min); see results.go for
	// how the hints derive from the servers'.
	MaxCacheTTL time.Duration
	// InputWait is how long a stateless-era client has to send the retry
	// of a request the gateway answered with input_required (default
	// 5 min): the call behind it waits that long, then is cancelled.
	InputWait time.Duration
	// SSEPollAfter is how long a tools/call of a 2025-11-25 (or later)
	// HTTP session may hold its POST's event stream open: then the
	// gateway ends the stream after a priming event, and the client
	// resumes it with a GET and Last-Event-ID to get the answer (SSE
	// polling, SEP-1699; mcpserver's HTTPOptions.PollAfter). Zero (the
	// default) or negative: never, since it costs every eligible call a
	// goroutine hand-off; see SuggestedSSEPollAfter.
	SSEPollAfter time.Duration
	// SSERetry is the retry field of that priming event: how long the
	// client waits before it resumes (default DefaultSSERetry).
	SSERetry time.Duration
	// KeepAlive is how often a client's idle event stream gets a comment
	// line: a GET stream, and the answer to a tools/call that takes longer
	// (it turns into an event stream), so that the client's connection
	// stays alive through a long call. Zero means mcpserver's default
	// (25 s).
	KeepAlive time.Duration
	// Parts are served by the HTTP handler beside the MCP endpoint and
	// the admin API: the dashboard (gateway/dashboard.New) is one. Nil:
	// none.
	Parts []Part
	// ChannelQueue bounds the channel messages kept per server for
	// wait_for_channel_message (default 1,000; the oldest is dropped and
	// counted). See ChannelSource.
	ChannelQueue int
	// SessionSeal, with keys, seals each HTTP session's state into its
	// Mcp-Session-Id, so that every gateway sharing the keys (replicas
	// behind one load balancer, or this one after a restart) serves the
	// session without a new initialize (mcpserver.SealOptions;
	// docs/sessions.md). The zero value keeps sessions in this process.
	SessionSeal mcpserver.SealOptions
	// TracerProvider, when not nil, records a server span for every
	// request a downstream client sends, continuing the trace context of
	// its params._meta (see tracing.go). Nil traces nothing.
	TracerProvider trace.TracerProvider
	// Audit, when not nil, records every tools/call, resources/read,
	// prompts/get, approval, admin action and refused request (an
	// *audit.Writer; see audit.go and docs/audit.md). Nil records nothing.
	Audit Auditor
	// StartupWait bounds how long the list requests made during start-up
	// wait for the servers configured at start to settle, counted from
	// ServersConfigured (see startup.go; DefaultStartupWait is a sane
	// value). Zero or negative: lists never wait, and a client that lists
	// early sees the servers ready by then.
	StartupWait time.Duration
	// Features are the host's own tools, resources and prompts, served
	// beside the pool's (see Features). Nil: the pool's only.
	Features *Features

	// MaxResultChars bounds the tools/call results of the pool's tools,
	// in characters (zero or negative: no bound); MaxResultCharsByServer
	// bounds those of one server's, by server name. A call's bound is the
	// smallest of these and of what the client asks in the request's
	// _meta (MetaMaxResultSizeChars). A result over it is cut at a clean
	// boundary, with a note, and the rest kept to be read with the tool
	// read_result_page (see resultpages.go).
	MaxResultChars         int
	MaxResultCharsByServer map[string]int
	// ResultStoreBytes bounds what is kept of the cut results, in bytes
	// (default DefaultResultStoreBytes, 64 MiB; the oldest is evicted
	// first; negative: nothing is kept); ResultStoreTTL is how long it is
	// kept (default DefaultResultStoreTTL, 10 min).
	ResultStoreBytes int64
	ResultStoreTTL   time.Duration

	// ToolMode chooses what tools/list offers: the whole pool
	// (ToolsFull, the zero value), a search tool in front of it
	// (ToolsSearch), or search once the pool's definitions exceed
	// SearchBudgetTokens (ToolsAuto). A client may choose for itself with
	// the endpoint path (/mcp/search, /mcp/full) or the query parameter
	// ?tools=search|full. See search.go.
	ToolMode ToolMode
	// SearchBudgetTokens is ToolsAuto's budget, in estimated tokens
	// (default DefaultSearchBudgetTokens).
	SearchBudgetTokens int
	// AlwaysOffer are globs (path.Match) of the downstream tool names
	// listed in search mode too, beside the search tools (the gateway's
	// own tools are always listed).
	AlwaysOffer []string
}

// Gateway is the downstream MCP server. Create it with New, run its event
// loop with Run (on a goroutine of its own, once), and serve it with
// Handler, Serve and/or ServeStdio, from as many goroutines as the host
// likes; end it with Drain (optional) and Close.
//
// Concurrency: every method is safe for concurrent use. Run is the one
// goroutine that reads the Backend's events and sends notifications
// downstream; requests are served on the goroutines of the HTTP server
// or of ServeStdio. Each piece of mutable state has one owner, a small
// type with its own lock: calls (callTable), inputs (inputRounds), chans
// (channelWaits), subs (resourceSubs), naming (namer), startup
// (startupWait), requests (requestCount), gate (accessGate), view
// (accessView), pages (resultPages); the fields set by New are not
// changed afterwards (the parts without mutable state, router and trail,
// hold only such fields). See the package doc for each part's job.
type Gateway struct {
	b    Backend
	opts Options
	log  zerolog.Logger

	// srv is the MCP server (the protocol: sessions, eras, streams);
	// the gateway is its Handler (server.go).
	srv *mcpserver.Server

	calls callTable   // the downstream calls in flight (upstream.go)
	gate  *accessGate // the caller, Allow/Deny, the access rules and rate limits (accessgate.go)
	// inputs are the stateless-era clients' calls that may need input
	// (mrtr.go).
	inputs *inputRounds
	reqSeq atomic.Uint64 // numbers the input requests asked of stateless-era clients

	mu sync.Mutex
	// excluded are the servers a managed policy keeps from running, by
	// name (SetExcluded); guarded by mu.
	excluded []ExcludedReport

	closed    chan struct{} // closed by Close: the admin and dashboard streams end
	closeOnce sync.Once

	subs *resourceSubs // upstream resource subscriptions (upstream.go)

	// events is the bus subscription New takes; Run reads it.
	// stopEvents ends it (Close, or Run returning).
	events     <-chan mcpvisor.Event
	stopEvents context.CancelFunc

	skipped skippedLayers // the config layers the latest load skipped (SetSkipped)
	metrics metrics       // counters; see metrics.go
	// naming maps names between the pool and downstream; Run resets it
	// when the pool changes (names.go).
	naming *namer
	// pool lists and finds what is served, and passes the extensions'
	// requests on (pool.go).
	pool *pool
	// requests counts the requests being served, for Drain.
	requests *requestCount
	// admin serves the admin API (admin.go).
	admin *admin
	// fanout sends the bus's events downstream (features.go).
	fanout *fanout
	// front checks every HTTP request (http.go).
	front   *front
	started time.Time
	// site is the Parts' way to the gateway (part.go).
	site *Site
	// chans are the channel messages queued for wait_for_channel_message
	// and the calls waiting for them (channels.go).
	chans *channelWaits
	// tracer makes the server spans; nil without Options.TracerProvider.
	tracer trace.Tracer
	// startup is the start-up wait (startup.go): lists wait at its
	// gate from ServersConfigured until the servers have settled or the
	// window has passed (Drain opens it too).
	startup *startupWait
	// features are the host's (Options.Features; may be nil).
	// hostChanged holds the list_changed methods its changes made due
	// (bits of hostListBits), hostSignal wakes Run to send them.
	features    *Features
	hostChanged atomic.Uint32
	hostSignal  chan struct{}
	// pages cuts the results to fit and keeps the rest for
	// read_result_page (resultpages.go); safe for concurrent use.
	pages *resultPages
	// search is the search mode's index and tools (search.go).
	search *searchMode
	// view is what each caller sees beyond the lists under the access
	// rules: audiences, session binding, filters, task tags
	// (accessview.go); safe for concurrent use.
	view *accessView
	// trail records the audited actions (audit.go); safe for concurrent
	// use.
	trail *auditTrail
	// router routes the calls (tools/call, prompts/get, resources/read;
	// features.go); safe for concurrent use.
	router *callRouter
}

// hostListBits numbers the list_changed methods a change of the host's
// Features makes due, for Gateway.hostChanged.
var hostListBits = [...]string{
	protocol.NotificationToolsListChanged,
	protocol.NotificationPromptsListChanged,
	protocol.NotificationResourcesListChanged,
}

// eventBuffer is how many bus events the gateway's subscription holds
// while Run is busy (or not yet running); beyond it the bus drops events
// and reports a gap, which the gateway answers with every list_changed.
const eventBuffer = 4096

// New returns a gateway over b. It subscribes to b's event bus at once:
// every event published after New returns reaches Run, even one published
// before Run starts (held in the subscription's buffer). Close (or Run
// returning) ends the subscription.
func New(b Backend, opts Options) *Gateway {
	if opts.SessionIdle <= 0 {
		opts.SessionIdle = time.Hour
	}
	if opts.OutboxSize <= 0 {
		opts.OutboxSize = 256
	}
	if opts.MaxSessions == 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.BodyTimeout == 0 {
		opts.BodyTimeout = mcpserver.DefaultBodyTimeout
	}
	if opts.MaxStreamsPerSession == 0 {
		opts.MaxStreamsPerSession = DefaultMaxStreamsPerSession
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.MaxCacheTTL <= 0 {
		opts.MaxCacheTTL = defaultMaxCacheTTL
	}
	if opts.InputWait <= 0 {
		opts.InputWait = defaultInputWait
	}
	if opts.ChannelQueue <= 0 {
		opts.ChannelQueue = channels.DefaultCapacity
	}
	g := &Gateway{
		b:       b,
		opts:    opts,
		log:     opts.Logger,
		closed:  make(chan struct{}),
		started: time.Now(),
		tracer:  newServerTracer(opts.TracerProvider),

		features:   opts.Features,
		hostSignal: make(chan struct{}, 1),
	}
	opts.Features.watch(g.hostListChanged)
	g.requests = &requestCount{idle: make(chan struct{}, 1)}
	g.search = newSearchMode(g)
	g.admin = &admin{g: g}
	g.naming = &namer{b: b, style: opts.Names, budget: opts.NameBudget}
	g.front = &front{opts: opts, metrics: &g.metrics, rs: newProtectedResource(opts.ResourceServer), log: g.log}
	g.startup = &startupWait{b: b, opts: opts, log: opts.Logger, naming: g.naming, closed: g.closed}
	g.pool = &pool{b: b, opts: opts, log: opts.Logger, naming: g.naming, features: opts.Features}
	g.gate = newAccessGate(opts, b, g.naming, g.pool, g.front)
	g.view = &accessView{gate: g.gate, front: g.front, metrics: &g.metrics, taskKey: newTaskKey(opts.SessionSeal)}
	g.chans = &channelWaits{capacity: opts.ChannelQueue, draining: &g.requests.draining, waits: map[*mcpserver.Session]context.CancelCauseFunc{}, only: g.view.channelFilter}
	g.trail = &auditTrail{sink: opts.Audit, gate: g.gate, naming: g.naming}
	g.pages = newResultPages(opts, g.gate)
	g.subs = newResourceSubs(b, opts.Logger, g.pool.serverOfResource)
	g.srv = newServer(g)
	g.fanout = &fanout{srv: g.srv, metrics: &g.metrics, log: opts.Logger, audience: g.view.audience}
	g.inputs = &inputRounds{srv: g.srv, log: opts.Logger, wait: opts.InputWait, workers: newCallWorkers(g.closed), parked: map[string]*parkedRound{}}
	g.router = &callRouter{b: b, features: opts.Features, gate: g.gate, view: g.view, naming: g.naming, pool: g.pool, calls: &g.calls,
		inputs: g.inputs, chans: g.chans, pages: g.pages, search: g.search, startup: g.startup, front: g.front, metrics: &g.metrics}
	g.metrics.init()
	ctx, cancel := context.WithCancel(context.Background())
	g.events, g.stopEvents = b.Subscribe(ctx, mcpvisor.BufferSize(eventBuffer)), cancel
	g.site = &Site{g: g}
	if src, ok := b.(ChannelSource); ok {
		// Open now, before any client: messages pushed meanwhile wait.
		g.chans.inbox = src.Channels().OpenInbox(context.Background(), channels.InboxOptions{Capacity: opts.ChannelQueue})
	}
	return g
}

// Run reads the supervisor's event bus (from the moment New returned) and
// fans its events out to the downstream sessions (list_changed, log
// messages, resource updates, channel messages) and to the metrics, until
// ctx ends, Close is called or the bus closes; then it ends the bus
// subscription. List changes are coalesced for debounce. Call Run once.
func (g *Gateway) Run(ctx context.Context, debounce time.Duration) {
	if debounce <= 0 {
		debounce = 25 * time.Millisecond
	}
	defer g.stopEvents()
	events := g.events
	pending := listChanges{} // list_changed notification methods due, and for whom (accessview.go)
	var timer <-chan time.Time
	expiry := time.NewTicker(time.Minute)
	defer expiry.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			g.metrics.event(ev)
			switch ev := ev.(type) {
			case *mcpvisor.ToolsChangedEvent:
				g.naming.reset()
				g.search.poolChanged(ev.Server)
				pending.add(protocol.NotificationToolsListChanged, ev.Server)
			case *mcpvisor.ListChangedEvent:
				if ev.Type == mcpvisor.EventPromptsChanged {
					g.naming.reset()
					pending.add(protocol.NotificationPromptsListChanged, ev.Server)
				} else {
					pending.add(protocol.NotificationResourcesListChanged, ev.Server)
				}
			case *mcpvisor.ServerToggledEvent:
				g.naming.reset()
				g.search.poolChanged(ev.Server)
				for _, m := range hostListBits {
					pending.add(m, ev.Server)
				}
			case *mcpvisor.LogMessageEvent:
				g.fanout.forwardLog(ev)
			case *mcpvisor.ResourceUpdatedEvent:
				g.fanout.forwardResourceUpdated(ev)
			case *mcpvisor.ChannelMessageEvent:
				g.fanout.forwardChannel(ev)
			case *mcpvisor.GapEvent:
				g.naming.reset()
				g.search.poolChanged("")
				// Lost events may have been list changes: tell everyone.
				for _, m := range hostListBits {
					pending.addAll(m)
				}
			}
			if len(pending) > 0 && timer == nil {
				timer = time.After(debounce)
			}
		case <-timer:
			timer = nil
			for _, method := range slices.Sorted(func(yield func(string) bool) {
				for m := range pending {
					if !yield(m) {
						return
					}
				}
			}) {
				g.fanout.broadcastListChanged(method, g.view.listAudience(pending[method]))
			}
			clear(pending)
		case <-g.hostSignal:
			bits := g.hostChanged.Swap(0)
			for i, m := range hostListBits {
				if bits&(1<<i) != 0 {
					pending.add(m, "") // the host's own: the server ""
				}
			}
			if len(pending) > 0 && timer == nil {
				timer = time.After(debounce)
			}
		case now := <-expiry.C:
			g.srv.ExpireIdle(now, g.opts.SessionIdle)
		case <-ctx.Done():
			return
		}
	}
}

// hostListChanged records that the host's list named by method changed
// and wakes Run (a Features watcher: called on the host's goroutine,
// never blocks).
func (g *Gateway) hostListChanged(method string) {
	for i, m := range hostListBits {
		if m == method {
			g.hostChanged.Or(1 << i)
		}
	}
	select {
	case g.hostSignal <- struct{}{}:
	default:
	}
}

// InFlight returns the number of downstream requests being served.
func (g *Gateway) InFlight() int64 { return g.requests.inflight.Load() }

// Drain refuses new downstream requests (with a JSON-RPC error, or 503
// over HTTP) and waits until the requests being served have finished, or
// ctx ends. It reports whether they all finished. Listen streams and
// channel waits, which never finish by themselves, are ended at once, and
// lists waiting for start-up answer. It may be called from any
// goroutine; the gateway stays draining until Close.
func (g *Gateway) Drain(ctx context.Context) bool {
	g.requests.draining.Store(true)
	// Listen streams and channel waits are requests that never finish by
	// themselves: end them now.
	g.srv.EndListens()
	g.chans.endAll()
	g.startup.open()
	for {
		if g.requests.inflight.Load() == 0 {
			return true
		}
		select {
		case <-g.requests.idle:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return g.requests.inflight.Load() == 0
		}
	}
}

// requestCount counts the downstream requests being served, for Drain.
//
// Concurrency: safe for concurrent use: atomic counters, and idle, a
// channel of capacity 1 signalled when the count drops to zero.
type requestCount struct {
	inflight atomic.Int64  // downstream requests being served
	idle     chan struct{} // signalled when inflight drops to zero
	draining atomic.Bool   // set by Drain: new requests are refused
}

// begin counts a request in; it returns false while draining.
func (rc *requestCount) begin() bool {
	rc.inflight.Add(1)
	if rc.draining.Load() {
		rc.end()
		return false
	}
	return true
}

func (rc *requestCount) end() {
	if rc.inflight.Add(-1) == 0 {
		select {
		case rc.idle <- struct{}{}:
		default:
		}
	}
}

// Close ends every session: GET and listen streams close, the stdio
// session's requests are cancelled, the channel queue is dropped. It
// also ends the bus subscription, and with it Run, and the Parts'
// streams (Site.Done). It returns at once and may be called more than
// once, from any goroutine; it does not close the Backend.
func (g *Gateway) Close() {
	g.closeOnce.Do(func() { close(g.closed) })
	g.stopEvents()
	if g.chans.inbox != nil {
		g.chans.inbox.Close()
	}
	g.srv.Close()
	g.inputs.cancelAll()
}

// offered reports whether the qualified tool name passes Allow and Deny.
func (g *accessGate) offered(name string) bool {
	if len(g.opts.Allow) > 0 && !matchAny(g.opts.Allow, name) {
		return false
	}
	return !matchAny(g.opts.Deny, name)
}

func matchAny(globs []string, name string) bool {
	for _, p := range globs {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// The gateway's own error codes (implementation-defined JSON-RPC server
// errors). Their data is an errorData.
const (
	// CodeRequestTimeout: the call's deadline passed.
	CodeRequestTimeout = -32001
	// CodeServerNotReady: the server behind the name is not connected
	// (or toggled off, or unknown).
	CodeServerNotReady = -32050
	// CodeConnectionLost: the server's connection ended while the call
	// was in flight; it may or may not have been carried out.
	CodeConnectionLost = -32051
	// CodeShuttingDown: the gateway is draining and takes no new requests.
	CodeShuttingDown = -32052
	// CodeCallRefused: the permission rules refused the call (a deny
	// rule, or the user declined it), or it needed approval and the
	// client could not be asked (it declared no elicitation).
	CodeCallRefused = -32053
)

// errorData is the data of the gateway's own errors.
type errorData struct {
	Server string `json:"server,omitempty"`
	// Failure is mcpvisor.ClassifyFailure's verdict: transient, closed,
	// session-expired, auth, config, protocol or call.
	Failure string `json:"failure,omitempty"`
	// Retryable says the same call may succeed later (after reconnect).
	Retryable bool `json:"retryable"`
}

// rpcError turns a supervisor error into the JSON-RPC error sent
// downstream. A server's own JSON-RPC error passes through unchanged.
func rpcError(err error) *protocol.Error {
	var pe *protocol.Error
	var nr *mcpvisor.NotReadyError
	var lost *mcpvisor.ConnectionLostError
	var e *protocol.Error
	var ar *mcpvisor.AuthorizationRequiredError
	kind := string(mcpvisor.ClassifyFailure(err))
	switch {
	case errors.As(err, &ar):
		return authorizationRequired(ar) // userauth.go
	case errors.As(err, &lost):
		e = protocol.NewError(CodeConnectionLost, "%v", err)
		e.Data, _ = json.Marshal(errorData{Server: lost.Server, Failure: kind, Retryable: true})
	case errors.As(err, &nr):
		// Before the timeout: a call that waited for its server until its
		// deadline says which server, in what state, and its last error.
		e = protocol.NewError(CodeServerNotReady, "%v", err)
		e.Data, _ = json.Marshal(errorData{Server: nr.Server, Failure: kind, Retryable: retryableState(nr.State)})
	case errors.Is(err, mcpvisor.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		e = protocol.NewError(CodeRequestTimeout, "%v", err)
		e.Data, _ = json.Marshal(errorData{Failure: kind, Retryable: true})
	case errors.Is(err, mcpvisor.ErrCallDenied), errors.Is(err, mcpvisor.ErrApprovalUnavailable):
		e = protocol.NewError(CodeCallRefused, "%v", err)
		e.Data, _ = json.Marshal(errorData{Failure: kind})
	case errors.Is(err, mcpvisor.ErrServerOff), errors.Is(err, mcpvisor.ErrServerNotReady):
		e = protocol.NewError(CodeServerNotReady, "%v", err)
		e.Data, _ = json.Marshal(errorData{Failure: kind})
	case errors.Is(err, mcpvisor.ErrUnknownTool), errors.Is(err, mcpvisor.ErrUnknownPrompt), errors.Is(err, mcpvisor.ErrUnknownServer):
		e = protocol.NewError(protocol.CodeInvalidParams, "%v", err)
	case errors.As(err, &pe):
		return pe
	case errors.Is(err, context.Canceled):
		e = protocol.NewError(protocol.CodeInternalError, "request cancelled")
	default:
		e = protocol.NewError(protocol.CodeInternalError, "%v", err)
		e.Data, _ = json.Marshal(errorData{Failure: kind})
	}
	return e
}

func errorf(code int64, format string, args ...any) *protocol.Error {
	return protocol.NewError(code, format, args...)
}

// retryableState reports whether a call refused because its server was
// in state st may succeed when retried: the server is on its way back.
func retryableState(st mcpvisor.State) bool {
	return !st.Parked() && st != mcpvisor.StateDisabled && st != mcpvisor.StateNeedsApproval
}

// ErrInvalidOptions is wrapped by the error Options.Validate returns.
var ErrInvalidOptions = errors.New("gateway: invalid options")

// Validate reports what of o New cannot honour: an Allow, Deny or
// AlwaysOffer glob that is not a valid path.Match pattern (it would match
// nothing), an unknown Names style or ToolMode. The error wraps ErrInvalidOptions. New does not
// call it (a bad glob there matches nothing); a host that takes these
// from its user calls it first, as `mcpvisor supervise` does.
func (o Options) Validate() error {
	for _, g := range slices.Concat(o.Allow, o.Deny, o.AlwaysOffer) {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("%w: bad tools glob %q: %v", ErrInvalidOptions, g, err)
		}
	}
	if o.ToolMode < ToolsFull || o.ToolMode > ToolsAuto {
		return fmt.Errorf("%w: tool mode %d: want ToolsFull, ToolsSearch or ToolsAuto", ErrInvalidOptions, o.ToolMode)
	}
	if _, ok := ParseNameStyle(string(o.Names)); !ok {
		return fmt.Errorf("%w: names %q: want short, qualified or bare", ErrInvalidOptions, o.Names)
	}
	return o.ResourceServer.validate()
}

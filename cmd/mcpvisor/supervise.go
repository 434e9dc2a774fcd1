package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/channels"
	"github.com/mcpvisor/mcpvisor/config"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/gateway/access"
	"github.com/mcpvisor/mcpvisor/gateway/dashboard"
	"github.com/mcpvisor/mcpvisor/management"
	"github.com/mcpvisor/mcpvisor/mcpserver"
)

// DefaultListen is where `supervise` serves the gateway and the admin API.
const DefaultListen = "127.0.0.1:7979"

// superviseFlags are the flags of `supervise`.
type superviseFlags struct {
	audit auditFlags // --audit… (audit.go)

	listen       string
	stdio        bool
	tokenFile    string
	accessRules  string // --access-rules
	allowOrigins []string
	allowTools   []string
	denyTools    []string
	bareNames    bool
	toolNames    string
	nameBudget   int
	mgmtTools    bool
	watch        bool
	watchEvery   time.Duration
	grace        time.Duration
	maxSessions  int
	maxStreams   int
	maxState     int
	maxMemory    int64
	bodyTimeout  time.Duration
	channelQueue int
	pollAfter    time.Duration
	startupWait  time.Duration
	sessionKeys  string
	sessionStore string
	cluster      clusterFlags
	auth         authFlags
	// The search mode and results that fit (docs/gateway.md).
	toolMode       string
	searchBudget   int
	alwaysOffer    []string
	maxResultChars int
}

// superviseCmd is `mcpvisor supervise`: the gateway, the admin API, the
// reload loop, and with --cluster the cluster member. Its fields and the
// app's are owned by supervise's goroutine (the one cobra runs it in);
// the goroutines it starts (event log, config watch, serving) only read
// the loggers.
type superviseCmd struct {
	*app
	accessFile string // --access-rules, read again at each reload
}

func (a *superviseCmd) command() *cobra.Command {
	var f superviseFlags
	cmd := &cobra.Command{
		Use:   "supervise",
		Short: "Serve every configured server as one MCP endpoint (a gateway), with an admin API, until SIGINT or SIGTERM",
		Long: `supervise starts every configured server, keeps them connected, and serves them
to MCP hosts as one MCP server: their tools and prompts under
<server>__<name> (see --tool-names), their resources under their own URIs, calls routed to
the server behind each name, and list_changed notifications when the pool
changes. Every state change is logged to stderr.

Downstream transports:
  --listen ADDR  Streamable HTTP at http://ADDR/mcp (default 127.0.0.1:7979),
                 every MCP era: initialize (2024-11-05 … 2025-11-25, with
                 Mcp-Session-Id) and 2026-07-28 (server/discover, stateless).
  --stdio        one client on stdin/stdout (a host that starts mcpvisor as a
                 stdio server). The HTTP listener then runs only when --listen
                 is given explicitly. EOF on stdin shuts down like SIGTERM.

The same listener serves the dashboard and the admin API:
  GET /          a live dashboard: servers, tool pool, event log, channels,
                 with reconnect, toggle, login and reload buttons (see
                 docs/dashboard.md); with --token-file, a form that trades
                 the token for a login cookie
  GET /status    every server's state, strikes, attempt, next retry, last
                 error and class, tools, in-flight, latency p50/p99 (JSON)
  GET /metrics   Prometheus text format
  GET /events    the event stream (SSE; resume with Last-Event-ID = sequence)
'mcpvisor status' prints /status as a table.

Bounds: at most --max-sessions HTTP sessions are kept (default 1000); a new one
evicts the longest idle (sessions with a request in flight or a stream open go
last), whose next request gets 404, so its client initializes again. A session
may hold --max-streams-per-session GET streams (default 4; 409 beyond).
Evictions and refused streams are counted in /metrics.

Channel messages (servers declaring claude/channel) reach clients that declare
the capability as notifications/claude/channel, and wait in a queue for the
gateway's tool wait_for_channel_message (for clients without push): at most
--channel-queue messages per server (default 1000; the oldest is dropped, and
counted in /status, /metrics and on the next message delivered). The queue
starts with the gateway and survives reloads.

Start-up: a client that connects while the servers are still starting (a host
that runs 'supervise --stdio' itself, or connects as soon as the port answers)
and lists at once gets its tools/list, prompts/list and resources/list answered
once the servers configured at start have settled (ready, failed, needs-auth,
needs-approval, disabled; lazy servers excepted), or after --startup-wait
(default 30s; 0: at once). Servers that get ready later reach the clients by
list_changed. A call to a tool of a server still connecting waits for it within
the call's deadline, then fails with "server not ready" (-32050), never
"unknown tool".

Long calls: with --sse-poll-after D (e.g. 30s, behind a proxy that cuts idle
responses), the event stream answering a tools/call of a 2025-11-25 session
ends after D with a priming event (an id and a retry field); the call goes on,
and the client resumes the stream with a GET and Last-Event-ID to get its
answer (SSE polling, SEP-1699). Off by default: it costs every call a
goroutine hand-off.

Replicas: with --session-keys FILE (a JSON file of AES-256 keys, see
docs/sessions.md), each HTTP session's state is sealed into its
Mcp-Session-Id, so every gateway with the same keys (replicas behind a load
balancer, or this one after a restart) serves the session with no new
initialize; --session-store DIR, shared by the replicas, tells them of
deleted sessions and of log levels and subscriptions set after initialize.

Security: the listener is loopback by default, and then refuses requests whose
Host is not a loopback name, and browser requests whose Origin is not loopback
or an --allow-origin (DNS rebinding). With --token-file every HTTP request
needs "Authorization: Bearer <token>"; a non-loopback --listen requires one (or
--auth-issuer). With --auth-issuer URL the gateway is an OAuth 2.1 resource
server: OAuth access tokens of that authorization server (for this gateway's
resource URI), protected resource metadata at /.well-known/oauth-protected-resource,
the admin API needing --auth-admin-scope (docs/gateway-auth.md).
--allow-tools/--deny-tools filter the tools offered downstream by qualified
name (globs), after each server's own tools filter.

Names: a tool or prompt is offered as <server>__<name>, leaving room for the
prefix a host adds (Claude Code: mcp__<gateway>__); one longer than
--name-budget is cut and ends in a hash (the same on every start and cluster
member; _meta "io.mcpvisor/original" names the original). --tool-names
qualified offers the pool's names (mcp__<server>__<name>); --tool-names bare
(or --bare-names) a tool or prompt under its server's own name when that name
is unique in the pool. A call may always use the pool's name.

Live reload: SIGHUP (and, with --watch, a change of a config file or of the
approvals and tool pins in the state directory, polled and debounced) re-reads
the config layers and applies the difference: new servers start, removed ones
stop, changed ones reconnect, newly approved project servers start; tools whose
definition was approved meanwhile ('mcpvisor trust') join the pool. A config
that fails to load keeps the running one; the error is logged.

Shutdown: on SIGINT or SIGTERM the gateway refuses new requests, waits up to
--grace for the calls in flight, then shuts every server down (stdio servers:
close stdin, SIGTERM, SIGKILL to the process group) within 30 s. A second
signal ends the process at once.

Exit codes:
  0  shut down cleanly: every call in flight finished, every server process is gone
  1  the config could not be loaded or the listener could not start (nothing is
     started), or the shutdown was not clean (calls cut off at the grace period,
     or servers still stopping)
  2  usage error`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			listenSet := cmd.Flags().Changed("listen")
			return a.supervise(cmd.Context(), f, listenSet)
		},
	}
	fl := cmd.Flags()
	f.audit.register(cmd)
	fl.StringVar(&f.listen, "listen", DefaultListen, "serve the gateway (/mcp) and the admin API on `ADDR`; \"off\": no HTTP listener")
	fl.BoolVar(&f.stdio, "stdio", false, "serve one MCP client on stdin/stdout")
	fl.StringVar(&f.tokenFile, "token-file", "", "require the bearer token in `FILE` on every HTTP request")
	fl.StringVar(&f.accessRules, "access-rules", "",
		"the access rules and rate limits of the gateway's callers in `FILE` (JSON; instead of the config's \"access\" member; reloaded with the config)")
	fl.StringArrayVar(&f.allowOrigins, "allow-origin", nil, "also accept browser requests from `ORIGIN` (scheme://host:port; repeatable)")
	fl.StringArrayVar(&f.allowTools, "allow-tools", nil, "offer only tools whose qualified name matches `GLOB` (repeatable)")
	fl.StringArrayVar(&f.denyTools, "deny-tools", nil, "never offer tools whose qualified name matches `GLOB` (repeatable)")
	fl.BoolVar(&f.mgmtTools, "management-tools", false, "also offer the management tools (ListMcpResources, ReadMcpResource, SubscribeMcpResource, UnsubscribeMcpResource, SubscribePolling, UnsubscribePolling, ListMcpResourceTemplates, connect_mcp)")
	fl.BoolVar(&f.bareNames, "bare-names", false, "the same as --tool-names bare")
	fl.StringVar(&f.toolNames, "tool-names", string(gateway.NamesShort),
		"offer tools and prompts as `STYLE`: short (<server>__<name>), qualified (mcp__<server>__<name>) or bare (the server's own name where unique)")
	fl.IntVar(&f.nameBudget, "name-budget", gateway.DefaultNameBudget,
		"with --tool-names short, cut names longer than `N` characters (64, the model APIs' limit, less the prefix a host adds)")
	fl.StringVar(&f.toolMode, "tools", "full",
		"what tools/list offers a client that does not choose (at /mcp/search, /mcp/full or ?tools=): `MODE` full (every tool), search (a search tool, a describe tool and a call tool instead), or auto (search once the tool definitions exceed --search-budget)")
	fl.IntVar(&f.searchBudget, "search-budget", gateway.DefaultSearchBudgetTokens,
		"with --tools auto, search once the offered tool definitions exceed `N` tokens (estimated: JSON bytes / 4)")
	fl.StringArrayVar(&f.alwaysOffer, "always-offer", nil, "in search mode, list the tools whose name matches `GLOB` too (repeatable)")
	fl.IntVar(&f.maxResultChars, "max-result-chars", 0,
		"cut tool results longer than `N` characters at a clean boundary, with a note; the rest is read with read_result_page (0: only the bound a client asks in _meta)")
	fl.BoolVar(&f.watch, "watch", false, "reload when a config file changes (polled)")
	fl.DurationVar(&f.watchEvery, "watch-interval", time.Second, "how often --watch polls the config files")
	fl.DurationVar(&f.grace, "grace", 10*time.Second, "how long shutdown waits for calls in flight")
	fl.IntVar(&f.maxSessions, "max-sessions", gateway.DefaultMaxSessions,
		"keep at most `N` HTTP sessions: a new one evicts the longest idle (its next request gets 404); negative: no cap")
	fl.IntVar(&f.maxStreams, "max-streams-per-session", gateway.DefaultMaxStreamsPerSession,
		"allow at most `N` GET streams open at once per HTTP session (409 beyond); negative: no cap")
	fl.IntVar(&f.maxState, "max-session-state", mcpserver.DefaultMaxSessionState,
		"keep at most `BYTES` for one client's session: its client info, capabilities and subscriptions (an initialize or subscribe beyond it is refused with a JSON-RPC error); negative: no bound")
	fl.Int64Var(&f.maxMemory, "max-session-memory", mcpserver.DefaultMaxRetained,
		"keep at most `BYTES` for all sessions together (their state and 2 KiB each): a new HTTP session beyond it evicts the longest idle; negative: no bound")
	fl.DurationVar(&f.bodyTimeout, "body-timeout", mcpserver.DefaultBodyTimeout,
		"answer 408 and close the connection when a POST's body has not arrived `D` after its headers; negative: no bound")
	fl.IntVar(&f.channelQueue, "channel-queue", channels.DefaultCapacity,
		"keep at most `N` channel messages per server for wait_for_channel_message (the oldest is dropped and counted)")
	fl.DurationVar(&f.pollAfter, "sse-poll-after", 0,
		"end the POST event stream of a tools/call still running after `D`, e.g. 30s (2025-11-25 sessions; the client resumes it with Last-Event-ID, SEP-1699); 0: never")
	fl.DurationVar(&f.startupWait, "startup-wait", gateway.DefaultStartupWait,
		"during start-up, have tools/list, prompts/list and resources/list wait up to `D` for the configured servers to settle (ready or failed), so that a client that lists once at start sees the whole pool; 0: answer at once")
	fl.StringVar(&f.sessionKeys, "session-keys", "",
		"seal each HTTP session into its Mcp-Session-Id with the keys in `FILE`, so that every gateway sharing them (replicas, or this one restarted) serves it (docs/sessions.md)")
	fl.StringVar(&f.sessionStore, "session-store", "",
		"with --session-keys: keep the deleted sessions and their log levels and subscriptions in `STORE`, shared by the replicas: a directory, or etcd (--etcd-endpoint); default: this process's memory")
	f.cluster.register(fl)
	f.auth.register(fl)
	return cmd
}

// listenIsLoopback reports whether addr binds only loopback interfaces.
func listenIsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// gatewaySetup is what supervise checks and reads before it starts
// anything: whether to serve HTTP, the token, the session seal, whether
// the listener is loopback.
type gatewaySetup struct {
	serveHTTP bool
	token     string
	seal      mcpserver.SealOptions
	local     bool
	access    *access.Policy // the access rules (nil: none)
	auth      *authSetup     // nil without --auth-issuer
	// listenAddr is the HTTP listener's address, once it listens.
	listenAddr string
}

func (a *superviseCmd) gatewaySetup(f superviseFlags, listenSet bool) (gatewaySetup, error) {
	serveHTTP := f.listen != "off" && f.listen != "" && (!f.stdio || listenSet)
	if err := f.audit.check(f.stdio); err != nil {
		return gatewaySetup{}, err
	}
	if err := (gateway.Options{Allow: f.allowTools, Deny: f.denyTools}).Validate(); err != nil {
		return gatewaySetup{}, usageError("%v", err)
	}
	if _, ok := gateway.ParseToolMode(f.toolMode); !ok {
		return gatewaySetup{}, usageError("--tools %q: want full, search or auto", f.toolMode)
	}
	if err := (gateway.Options{AlwaysOffer: f.alwaysOffer}).Validate(); err != nil {
		return gatewaySetup{}, usageError("--always-offer: %v", err)
	}
	if _, ok := gateway.ParseNameStyle(f.toolNames); !ok {
		return gatewaySetup{}, usageError("--tool-names %q: want short, qualified or bare", f.toolNames)
	}
	var token string
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return gatewaySetup{}, usageError("--token-file: %v", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return gatewaySetup{}, usageError("--token-file %s is empty", f.tokenFile)
		}
	}
	var seal mcpserver.SealOptions
	if f.sessionKeys != "" {
		store, err := a.sessionStore(f.sessionStore)
		if err != nil {
			return gatewaySetup{}, usageError("--session-store: %v", err)
		}
		if seal, err = loadSessionSeal(f.sessionKeys, store); err != nil {
			return gatewaySetup{}, usageError("--session-keys: %v", err)
		}
	} else if f.sessionStore != "" {
		return gatewaySetup{}, usageError("--session-store needs --session-keys")
	}
	local := listenIsLoopback(f.listen)
	auth, err := f.auth.check(local)
	if err != nil {
		return gatewaySetup{}, err
	}
	if serveHTTP && !local && token == "" && auth == nil {
		return gatewaySetup{}, usageError("--listen %s is not a loopback address: it requires --token-file or --auth-issuer", f.listen)
	}
	a.accessFile = f.accessRules
	policy, err := a.configs.loadAccess(f.accessRules)
	if err != nil {
		return gatewaySetup{}, usageError("%v", err)
	}
	return gatewaySetup{serveHTTP: serveHTTP, token: token, seal: seal, local: local, auth: auth, access: policy}, nil
}

func (a *superviseCmd) supervise(ctx context.Context, f superviseFlags, listenSet bool) error {
	if f.cluster.on {
		return a.superviseCluster(ctx, f, listenSet)
	}
	setup, err := a.gatewaySetup(f, listenSet)
	if err != nil {
		return err
	}

	sigs, hups, stopSignals := shutdownSignals()
	defer stopSignals()

	cfg, err := a.configs.load()
	if err != nil {
		a.configs.logError(err)
		return failed(nil)
	}
	trail, err := f.audit.open(a.app, "")
	if err != nil {
		return failed(nil)
	}
	defer a.closeAudit(trail)
	var ln net.Listener
	if setup.serveHTTP {
		if ln, err = net.Listen("tcp", f.listen); err != nil {
			a.log.Error().Err(err).Str("listen", f.listen).Msg("cannot listen")
			return failed(nil)
		}
		setup.listenAddr = ln.Addr().String()
	}
	// The servers' requests to their client (sampling, elicitation,
	// roots) go to a downstream client of the gateway.
	var fwd gateway.Forwarder
	// Logins the dashboard starts hand their URL to its page.
	var logins dashboard.LoginRelay
	configure := []func(*mcpvisor.Options){fwd.Configure, logins.Configure}
	// The management tools act on the supervisor, known once started.
	var managed atomic.Pointer[mcpvisor.Supervisor]
	if f.mgmtTools {
		configure = append(configure, func(o *mcpvisor.Options) {
			o.Builtins = append(o.Builtins, management.Tools(managed.Load)...)
		})
	}
	// The permission rules of the config; the calls that need approval
	// are put to the calling client (the Forwarder's ApproveCall).
	configure = append(configure, func(o *mcpvisor.Options) { o.Permissions = cfg.Permissions })
	configure = append(configure, setup.auth.userAuthorization(setup.listenAddr))
	tr, err := a.startTracing(ctx)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return failed(nil)
	}
	defer a.stopTracing(tr)
	configure = append(configure, func(o *mcpvisor.Options) { o.TracerProvider = tr.tracerProvider() })
	sup, err := a.startSupervisor(ctx, false, configure...)
	managed.Store(sup)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return failed(nil)
	}

	// The event log. The channel closes when the supervisor does.
	waitLogged := a.startEventLog(sup.Subscribe(context.Background(), mcpvisor.BufferSize(1024)))

	// The dashboard's reload button runs a reload in the loop below,
	// like SIGHUP.
	reloads := make(chan chan error)
	gopts := a.gatewayOptions(f, setup)
	gopts.TracerProvider = tr.tracerProvider()
	gopts.Parts = []gateway.Part{dashboard.New(dashboard.Options{Reload: reloadVia(reloads), Logins: &logins})}
	if trail != nil {
		gopts.Audit = trail
	}
	gw := gateway.New(sup, gopts)
	fwd.Attach(gw)
	gw.SetSkipped(cfg.Skipped)
	gw.SetExcluded(cfg.Excluded)
	serving := a.serveGateway(gw)

	res, err := sup.SetServers(ctx, cfg.Servers)
	if err != nil {
		a.log.Error().Err(err).Msg("configuring the supervisor")
		serving.stop()
		if ln != nil {
			ln.Close()
		}
		a.closeSupervisor(sup)
		return failed(nil)
	}
	a.logApplied(cfg, res, "supervising")
	// Clients that list during start-up wait for these servers (up to
	// --startup-wait).
	gw.ServersConfigured()
	if len(cfg.Servers) == 0 {
		a.log.Warn().Msg("no servers configured")
	}

	serving.serveHTTP(ln)
	if ln != nil {
		url := "http://" + ln.Addr().String()
		a.log.Info().Str("dashboard", url+"/").Str("mcp", url+gateway.MCPPath).Str("status", url+"/status").Str("metrics", url+"/metrics").
			Str("events", url+"/events").Bool("token", setup.token != "").Msg("gateway listening")
	}
	if f.stdio {
		serving.serveStdio()
	}

	var watchC <-chan struct{}
	if f.watch {
		watchC = a.watchConfig(serving.ctx, cfg, f.watchEvery)
	}

	var why string
	var sig os.Signal
loop:
	for {
		select {
		case sig = <-sigs:
			why = "signal"
			break loop
		case <-serving.stdinDone:
			why = "stdin closed"
			break loop
		case <-ctx.Done():
			why = "context ended"
			break loop
		case <-hups:
			a.reload(ctx, sup, gw, "SIGHUP")
		case <-watchC:
			a.reload(ctx, sup, gw, "config file changed")
		case done := <-reloads:
			done <- a.reload(ctx, sup, gw, "dashboard")
		}
	}
	signal.Stop(sigs) // from now on a second signal ends the process at once

	ev := a.log.Info().Str("reason", why).Stringer("grace", f.grace).Int64("in_flight", gw.InFlight())
	if sig != nil {
		ev = ev.Str("signal", sig.String())
	}
	ev.Msg("shutting down")
	dctx, cancel := context.WithTimeout(context.Background(), f.grace)
	drained := gw.Drain(dctx)
	cancel()
	if !drained {
		a.log.Warn().Int64("in_flight", gw.InFlight()).Msg("grace period over: cutting off the calls still in flight")
	}
	serving.stop()
	a.log.Info().Stringer("timeout", closeTimeout).Msg("shutting down servers")
	closeErr := a.closeSupervisor(sup)
	waitLogged()
	if closeErr != nil || !drained {
		a.log.Error().Bool("drained", drained).Bool("servers_stopped", closeErr == nil).Msg("stopped, not cleanly")
		return failed(nil)
	}
	a.log.Info().Msg("stopped")
	return nil
}

// logApplied logs what a SetServers did.
func (a *superviseCmd) logApplied(cfg *config.Config, res mcpvisor.SetResult, msg string) {
	disabled := 0
	for _, sc := range cfg.Servers {
		if sc.Disabled {
			disabled++
		}
	}
	e := a.log.Info().Strs("files", cfg.Files).Int("servers", len(cfg.Servers)).Int("added", len(res.Added)).
		Int("removed", len(res.Removed)).Int("changed", len(res.Changed)).Int("disabled", disabled).
		Int("errors", len(res.Errors))
	if len(res.Added)+len(res.Removed)+len(res.Changed) > 0 {
		e = e.Strs("added_servers", res.Added).Strs("removed_servers", res.Removed).Strs("changed_servers", res.Changed)
	}
	e.Msg(msg)
	for _, name := range slices.Sorted(maps.Keys(res.Errors)) {
		a.log.Error().Str("server", name).Err(res.Errors[name]).Msg("server config rejected")
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Lowered)) {
		a.log.Warn().Str("server", name).Str("layer", cfg.Layers[name]).Str("lowered", cfg.Lowered[name]).
			Msg("an untrusted layer's entry asked for more trust than the user's config gives; lowered")
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Excluded)) {
		a.log.Warn().Str("server", name).Str("reason", cfg.Excluded[name]).Msg("server excluded by policy; not started")
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Pending)) {
		p := cfg.Pending[name]
		a.log.Warn().Str("server", name).Str("file", p.File).Str("reason", p.Reason).
			Msg("server needs approval; not started (run 'mcpvisor trust' in " + p.Project + ")")
	}
}

// reloadVia returns a reload function (DashboardOptions.Reload) that has
// the supervise loop reload and waits for its verdict.
func reloadVia(reloads chan<- chan error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		done := make(chan error, 1)
		select {
		case reloads <- done:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// reload re-reads the configuration and applies the difference (and
// hands the gateway the servers a policy now excludes and the layers it
// skipped). A config that fails to load changes nothing; its error is
// returned (and logged).
func (a *superviseCmd) reload(ctx context.Context, sup *mcpvisor.Supervisor, gw *gateway.Gateway, why string) error {
	cfg, err := a.configs.load()
	if err != nil {
		a.configs.logError(err)
		a.log.Error().Str("trigger", why).Msg("config reload failed: keeping the running config")
		return fmt.Errorf("config reload failed, the running config stays: %w", err)
	}
	gw.SetSkipped(cfg.Skipped)
	policy, err := a.configs.loadAccess(a.accessFile)
	if err != nil {
		a.log.Error().Err(err).Str("trigger", why).Msg("config reload: the access rules")
		return fmt.Errorf("config reload: the access rules: %w", err)
	}
	gw.SetAccess(policy)
	if err := sup.SetPermissions(cfg.Permissions); err != nil {
		a.log.Error().Err(err).Str("trigger", why).Msg("config reload: the permission rules")
		return fmt.Errorf("config reload: the permission rules: %w", err)
	}
	res, err := sup.SetServers(ctx, cfg.Servers)
	if err != nil {
		a.log.Error().Err(err).Str("trigger", why).Msg("config reload: applying failed")
		return fmt.Errorf("config reload: applying failed: %w", err)
	}
	a.logApplied(cfg, res, "config reloaded ("+why+")")
	gw.SetExcluded(cfg.Excluded)
	// Tool definitions approved meanwhile join the pool.
	if err := sup.RecheckToolPins(ctx); err != nil {
		a.log.Warn().Err(err).Msg("rechecking the tool pins")
	}
	return nil
}

// watchConfig polls the config files' modification times every interval
// and signals on the returned channel once a change has been quiet for
// one interval (debounce). Missing files are watched too (a layer created
// later counts as a change).
func (a *superviseCmd) watchConfig(ctx context.Context, cfg *config.Config, interval time.Duration) <-chan struct{} {
	if interval <= 0 {
		interval = time.Second
	}
	files := slices.Clone(cfg.Files)
	files = append(files, a.configs.files...)
	if len(a.configs.files) == 0 {
		if home, err := os.UserHomeDir(); err == nil {
			files = append(files, filepath.Join(home, ".mcp.json"))
		}
		files = append(files, ".mcp.json", ".mcp.local.json", config.DefaultManagedFile)
	}
	if store := a.state.trustStore(); store != nil {
		// Approvals ('mcpvisor trust' in another process) apply by
		// themselves; the pins directory changes when a pins file is
		// replaced.
		files = append(files, store.Files()...)
	}
	slices.Sort(files)
	files = slices.Compact(files)
	stamp := func() string {
		var b strings.Builder
		for _, f := range files {
			if st, err := os.Stat(f); err == nil {
				fmt.Fprintf(&b, "%s %d %d\n", f, st.ModTime().UnixNano(), st.Size())
			} else {
				fmt.Fprintf(&b, "%s -\n", f)
			}
		}
		return b.String()
	}
	out := make(chan struct{}, 1)
	go func() {
		last := stamp()
		dirty := false
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := stamp()
			switch {
			case now != last:
				last, dirty = now, true // changed: wait until it holds still
			case dirty:
				dirty = false
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	a.log.Info().Strs("files", files).Stringer("interval", interval).Msg("watching the config files")
	return out
}

// logEvents logs every event of the stream until it closes.
func (a *superviseCmd) logEvents(events <-chan mcpvisor.Event) {
	for ev := range events {
		h := ev.Header()
		switch ev := ev.(type) {
		case *mcpvisor.ServerStateEvent:
			e := a.log.Info().Uint64("seq", h.Seq).Str("server", h.Server).Str("state", string(ev.State))
			if ev.Previous != "" {
				e = e.Str("previous", string(ev.Previous))
			}
			if ev.Err != "" {
				e = e.Str("error", ev.Err)
			}
			e.Msg("server state")
		case *mcpvisor.ToolsChangedEvent:
			logDiff(a.log.Info().Uint64("seq", h.Seq).Str("server", h.Server), ev.Diff).Int("tools", ev.Tools).Msg(string(h.Type))
		case *mcpvisor.ListChangedEvent:
			logDiff(a.log.Info().Uint64("seq", h.Seq).Str("server", h.Server), ev.Diff).Msg(string(h.Type))
		case *mcpvisor.CollisionEvent:
			c := ev.Collision
			a.log.Warn().Uint64("seq", h.Seq).Str("kind", c.Kind).Str("name", c.Name).Str("holder", c.Holder).
				Str("server", c.Server).Str("original", c.Original).Str("renamed", c.Renamed).Msg("name collision")
		case *mcpvisor.ToolDefinitionChangedEvent:
			// The library has logged it, with its diff, through a.libLog;
			// this line adds only what to do about it.
			c := ev.ToolChange
			a.log.Info().Uint64("seq", h.Seq).Str("server", h.Server).Str("tool", c.Tool).Str("action", string(c.Action)).
				Msg("run 'mcpvisor trust' to review it")
		case *mcpvisor.ServerToggledEvent:
			a.log.Info().Uint64("seq", h.Seq).Str("server", h.Server).Bool("off", ev.ToggledOff).Msg("server toggled")
		case *mcpvisor.LogMessageEvent:
			a.log.Info().Uint64("seq", h.Seq).Str("server", h.Server).Str("level", ev.Level).RawJSON("params", ev.Data).Msg("server log")
		case *mcpvisor.GapEvent:
			a.log.Warn().Uint64("seq", h.Seq).Uint64("dropped", ev.Dropped).Str("reason", ev.GapReason).Msg("events lost")
		default:
			a.log.Debug().Uint64("seq", h.Seq).Str("type", string(h.Type)).Str("server", h.Server).Msg("event")
		}
	}
}

// logDiff adds a list diff to a log entry.
func logDiff(e *zerolog.Event, d *mcpvisor.ListDiff) *zerolog.Event {
	if d == nil {
		return e
	}
	return e.Strs("added", d.Added).Strs("removed", d.Removed).Strs("changed", d.Changed)
}

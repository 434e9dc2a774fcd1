package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Options configure a Member. The zero value of each field but Port,
// ProviderPort and Peers is a useful default.
type Options struct {
	// Name is the cluster's name: members of different names ignore each
	// other. Default "mcpvisor".
	Name string
	// Host is the address the member listens on, for remote traffic and
	// for the membership endpoint, and the address the other members
	// dial it by. Default "127.0.0.1". A Host that is not loopback
	// ("localhost" or a loopback IP) requires TLS (ErrInsecure, wrapped
	// in ErrStart).
	Host string
	// TLS, when set, makes both of the member's endpoints (the remote's
	// gRPC port and the membership endpoint) speak mutual TLS: a peer
	// must present a certificate signed by RootCAs (or ClientCAs, when
	// set), and the member presents Certificates both when it serves
	// and when it dials, verifying the peer's certificate against
	// RootCAs and the address it dials. Build it with LoadTLS. Nil:
	// plain, allowed on loopback only. The etcd membership's own TLS is
	// Etcd.TLS.
	TLS *tls.Config
	// Port is the member's remote (gRPC) port. Required.
	Port int
	// ProviderPort is the port of the member's membership endpoint.
	// Required unless Etcd is set.
	ProviderPort int
	// Peers are the membership endpoints (host:port) of every member,
	// this one included (a static peer list: tests, a local demo).
	// Required unless Etcd is set.
	Peers []string
	// Etcd, when set, makes the membership protoactor's etcd provider
	// over this client configuration (production); ProviderPort and
	// Peers are then unused. Each member registers under EtcdPrefix with
	// a 3 s lease: a killed member is noticed when its lease expires.
	// Its Logger, when nil, is one that logs nothing.
	Etcd *clientv3.Config
	// EtcdPrefix starts the membership's etcd keys. Default
	// "/mcpvisor-cluster".
	EtcdPrefix string
	// Labels describe this member: a server whose ServerConfig.Nodes
	// names one of them may run here (at most one label per server).
	Labels map[string]string
	// Supervisor configures the member-local Supervisor that runs the
	// servers placed on this member (Logger, OAuth, timeouts, …). Its
	// Logger also receives what the member and protoactor log. Builtins
	// are not offered in cluster mode.
	Supervisor mcpvisor.Options
	// Refresh is how often the member re-reads the cluster-wide pool
	// when no member signalled a change (a safety net: changes are
	// pushed). Default 1 s.
	Refresh time.Duration
	// MembershipPoll is how often the static-peer membership polls the
	// peers; a dead member is noticed within about one period. Default
	// 500 ms.
	MembershipPoll time.Duration
	// HeartbeatExpiration is how long gossip waits for a member's
	// heartbeat before blocking it (protoactor's default, 20 s, would
	// delay failover). Default 5 s.
	HeartbeatExpiration time.Duration
	// OnMemberEvent, when set, receives what this member did with a
	// server (activated, ready, released, fenced). It is called from the
	// member's goroutines and must not block.
	OnMemberEvent func(MemberEvent)
}

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = "mcpvisor"
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Refresh <= 0 {
		o.Refresh = time.Second
	}
	if o.MembershipPoll <= 0 {
		o.MembershipPoll = 500 * time.Millisecond
	}
	if o.HeartbeatExpiration <= 0 {
		o.HeartbeatExpiration = 5 * time.Second
	}
	if o.EtcdPrefix == "" {
		o.EtcdPrefix = "/mcpvisor-cluster"
	}
	return o
}

func (o Options) validate() error {
	if o.TLS == nil && !isLoopbackHost(o.Host) {
		return fmt.Errorf("%w: %w: Host %q", ErrStart, ErrInsecure, o.Host)
	}
	if o.Etcd != nil {
		if o.Port <= 0 {
			return fmt.Errorf("%w: Port is required (got %d)", ErrStart, o.Port)
		}
		if len(o.Etcd.Endpoints) == 0 {
			return fmt.Errorf("%w: Etcd.Endpoints is empty", ErrStart)
		}
		return nil
	}
	if o.Port <= 0 || o.ProviderPort <= 0 {
		return fmt.Errorf("%w: Port and ProviderPort are required (got %d, %d)", ErrStart, o.Port, o.ProviderPort)
	}
	if len(o.Peers) == 0 {
		return fmt.Errorf("%w: Peers is empty (list every member's membership endpoint, this one included)", ErrStart)
	}
	return nil
}

// Member is one member of a cluster of supervisors: every configured
// server runs on exactly one member, and each member offers the
// cluster-wide pool. Tools, Status and Subscribe show every server of the
// cluster (ServerStatus.Member names the member that runs each), and
// CallTool reaches the member that runs the tool's server, with the
// typed errors of a mcpvisor.Supervisor. Prompts and resources are not
// offered across members yet (empty lists). A call's principal
// (mcpvisor.WithPrincipal) travels with it to the member that runs the
// server, and the pending authorizations of per-user servers are found
// on whichever member holds them (userauth.go): Member satisfies the
// gateway's UserAuthorizer.
//
// Concurrency: every method is safe for concurrent use. The engine (the
// member's place in the protoactor cluster, engine.go) runs on its own
// goroutines; the pool view is replaced whole by the refresher goroutine
// (its one writer) and read under viewMu; the event bus guards itself.
type Member struct {
	e    *engine
	opts Options
	bus  *eventBus

	viewMu sync.Mutex
	view   view // guarded by viewMu; written by refresh
	// known maps every pool name ever seen to its server and tool, so
	// that a call during a re-homing (the server's tools briefly absent
	// from the view) still reaches the server; pruned by SetServers
	// (guarded by viewMu).
	known map[string]toolTarget
	// configured is the set of server names of the last SetServers
	// (guarded by viewMu), what WaitSettled waits for.
	configured map[string]mcpvisor.ServerConfig
	// viewChanged is closed and replaced each time refresh replaces the
	// view (guarded by viewMu).
	viewChanged chan struct{}

	wake chan struct{} // wakes the refresher (coalesced)
	stop context.CancelFunc
	done chan struct{} // closed when the refresher returns
}

// toolTarget is the server and the server's own name of a pool tool.
type toolTarget struct{ server, tool string }

// Start starts a member: its local Supervisor, its place in the cluster
// (it returns once joined, about a second), and the refresher of its
// cluster-wide pool. It runs no server until SetServers names some and
// the cluster places them here. A process runs one member at a time
// (ErrMemberRunning). ctx is not retained.
func Start(ctx context.Context, opts Options) (*Member, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	m := &Member{
		opts:  opts,
		bus:   newEventBus(opts.Supervisor.EventBuffer),
		known: map[string]toolTarget{},
		wake:  make(chan struct{}, 1),

		viewChanged: make(chan struct{}),
		done:        make(chan struct{}),
	}
	e, err := startEngine(opts, func(string) { m.signal() })
	if err != nil {
		return nil, err
	}
	m.e = e
	rctx, stop := context.WithCancel(context.Background())
	m.stop = stop
	go m.refresher(rctx)
	return m, nil
}

// Fenced is closed when the cluster removed this member: it stopped
// answering long enough (a network partition, a paused process) that
// the others re-homed its servers, and protoactor never lets the same id
// back in. The member has then released every server and left; the host
// should Close it and start a new member to rejoin (supervise exits with
// an error, so that its service manager restarts it).
func (m *Member) Fenced() <-chan struct{} { return m.e.fencing.fenced }

// ID is the member's id in the cluster (protoactor's member id; a
// restarted process gets a new one).
func (m *Member) ID() string { return m.e.id }

// Address is the member's remote address (host:port).
func (m *Member) Address() string { return m.e.sys.Address() }

// SetServers makes servers the cluster's configured set as this member
// sees it (every member loads the same config; a reload on every member
// converges). Servers this member owns are activated, those it runs get
// their changed config, those no longer configured are released. A
// server whose Nodes selector is bad is left out and named in the error
// (errors.Is ErrSelector).
func (m *Member) SetServers(servers map[string]mcpvisor.ServerConfig) error {
	err := m.e.setServers(servers)
	m.viewMu.Lock()
	m.configured = maps.Clone(servers)
	for name, t := range m.known {
		if _, ok := servers[t.server]; !ok {
			delete(m.known, name)
		}
	}
	m.viewMu.Unlock()
	m.signal()
	return err
}

// WaitSettled waits until every server of the last SetServers has
// settled in the member's cluster-wide view — ready, failed, needs-auth,
// needs-approval or disabled, wherever in the cluster it runs (a lazy
// server waiting for its first use counts as settled) — or until ctx
// ends (its error) or the member closes (mcpvisor.ErrClosed). The
// gateway's start-up wait uses it, so that a client that lists early in
// cluster mode sees the whole pool, as on one node.
func (m *Member) WaitSettled(ctx context.Context) error {
	for {
		m.viewMu.Lock()
		settled, changed := m.settledLocked(), m.viewChanged
		m.viewMu.Unlock()
		if settled {
			return nil
		}
		m.signal()
		select {
		case <-changed:
		case <-m.done:
			return mcpvisor.ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// settledLocked reports whether every configured server shows settled in
// the view. Called with viewMu held.
func (m *Member) settledLocked() bool {
	seen := make(map[string]bool, len(m.configured))
	for name, cfg := range m.configured {
		if cfg.Disabled || cfg.NeedsApproval != "" || cfg.Lazy {
			seen[name] = true // never started by a SetServers: nothing to wait for
		}
	}
	for _, st := range m.view.status {
		if _, ok := m.configured[st.Name]; !ok {
			continue
		}
		if !st.State.Settled() && !(st.Lazy && st.State == mcpvisor.StatePending) {
			return false
		}
		seen[st.Name] = true
	}
	return len(seen) == len(m.configured)
}

// Tools returns the cluster-wide tool pool (qualified names, sorted), as
// of the member's latest view. The slice is the caller's.
func (m *Member) Tools() []mcpvisor.Tool {
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	return append([]mcpvisor.Tool(nil), m.view.tools...)
}

// Status returns every server of the cluster with the member that runs
// it (ServerStatus.Member), as of the member's latest view.
func (m *Member) Status() []mcpvisor.ServerStatus {
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	return append([]mcpvisor.ServerStatus(nil), m.view.status...)
}

// Overview asks every member of the current topology what it runs, now,
// in parallel, each bounded by ctx's deadline (2 s when it has none), and
// returns the cluster-wide status and tools. Unlike Status and Tools it
// waits for the members' answers; a server in the middle of a hand-over
// may be listed by two members.
func (m *Member) Overview(ctx context.Context) (Overview, error) { return m.e.overview(ctx) }

// CallTool calls a tool of the cluster-wide pool by its qualified name on
// the member that runs its server, and returns what
// mcpvisor.Supervisor.CallTool returns (mcpvisor.ErrUnknownTool,
// *mcpvisor.NotReadyError, *mcpvisor.ConnectionLostError,
// *mcpvisor.TimeoutError, …). The call's deadline is ctx's, else the
// server's timeoutMs, else Options.Supervisor.CallTimeout, as on one
// node. While the server is being re-homed the call waits for its new
// owner within that deadline (at most 30 s when ctx has none).
func (m *Member) CallTool(ctx context.Context, name string, args any) (*protocol.CallToolResult, error) {
	raw, err := encodeArgs(args)
	if err != nil {
		return nil, fmt.Errorf("mcpvisor cluster: arguments of %s: %w", name, err)
	}
	t, ok := m.target(name)
	if !ok {
		// A tool added since the last view: look again once.
		m.refresh(ctx)
		if t, ok = m.target(name); !ok {
			// A per-user server's tools are pooled once a principal's
			// session listed them (userauth.go).
			if t, ok = m.principalTarget(ctx, name); !ok {
				return nil, fmt.Errorf("%w: %q", mcpvisor.ErrUnknownTool, name)
			}
		}
	}
	return m.e.callTool(ctx, t.server, t.tool, raw)
}

// CallServerTool calls the tool a server names tool (its own name, not
// the pool's) on the member that runs the server, with CallTool's
// deadline and errors. An unknown server is mcpvisor.ErrUnknownServer.
func (m *Member) CallServerTool(ctx context.Context, server, tool string, args any) (*protocol.CallToolResult, error) {
	raw, err := encodeArgs(args)
	if err != nil {
		return nil, fmt.Errorf("mcpvisor cluster: arguments of %s: %w", tool, err)
	}
	return m.e.callTool(ctx, server, tool, raw)
}

func (m *Member) target(name string) (toolTarget, bool) {
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	t, ok := m.known[name]
	return t, ok
}

// Subscribe returns the cluster-wide event stream: server_state (a
// server's state or member changed) and tools_changed (its tools in the
// pool changed) for every server of the cluster, numbered by this
// member. mcpvisor.FromSequence and mcpvisor.BufferSize apply. A slow
// subscriber never blocks the member (it gets a gap event). The channel
// closes when ctx ends or the member closes.
func (m *Member) Subscribe(ctx context.Context, opts ...mcpvisor.SubscribeOption) <-chan mcpvisor.Event {
	after, resume, buffer := mcpvisor.ResolveSubscribeOptions(opts...)
	return m.bus.subscribe(ctx, resume, after, buffer)
}

// Leave hands this member's servers over to the others and leaves the
// cluster gracefully, in this order:
//
//  1. drain: the member takes no new calls (callers elsewhere get a
//     retryable refusal and try the server's next owner) and places no
//     new server; it tells the other members, which send it no call
//     from then on;
//  2. the calls in flight finish, or fail typed by ctx's deadline;
//  3. its servers are released (the local Supervisor shuts them down),
//     so that no server ever runs on two members;
//  4. it leaves: the other members see it gone at their next poll and
//     activate its servers;
//  5. it keeps answering "draining" until no call has reached it for two
//     membership polls, then shuts its cluster side down.
//
// Close afterwards. Leave is idempotent.
func (m *Member) Leave(ctx context.Context) error { return m.e.leave(ctx) }

// Close leaves the cluster (without draining: Leave first for a graceful
// hand-over), shuts the member's servers down (the local Supervisor's
// Close), stops the member's goroutines and ends its event streams. It
// returns when all that is done or ctx ends. It is idempotent.
func (m *Member) Close(ctx context.Context) error {
	m.stop()
	select {
	case <-m.done:
	case <-ctx.Done():
	}
	err := m.e.close(ctx)
	m.bus.close()
	if errors.Is(err, ErrLeft) {
		return nil
	}
	return err
}

// encodeArgs is a call's arguments as JSON: a json.RawMessage or []byte
// as it is, nil as nothing, any other value encoded.
func encodeArgs(args any) (json.RawMessage, error) {
	switch a := args.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return a, nil
	case []byte:
		return json.RawMessage(a), nil
	}
	return json.Marshal(args)
}

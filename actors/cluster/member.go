package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/internal/routine"
)

// Kind is the grain kind of a supervised MCP server; a grain's identity
// is the server's name.
const Kind = "mcpserver"

// maxMessageBytes is the largest message a member's remote accepts from
// another member (gRPC's default is 4 MiB).
const maxMessageBytes = 256 << 20

// contextDeadline is the error a call that ran out of time wraps.
var contextDeadline = context.DeadlineExceeded

// oneMemberPerProcess is held by the running member of this process.
// protoactor's remote.Start replaces grpc's process-global logger without
// synchronisation while an earlier member's gRPC goroutines read it (a
// data race under -race, notes/protoactor.md hazard 7): a process runs
// one member at a time.
var oneMemberPerProcess sync.Mutex

// Options configure a Member. The zero value of each field but Port,
// ProviderPort and Peers is a useful default.
type Options struct {
	// Name is the cluster's name: members of different names ignore each
	// other. Default "mcpvisor".
	Name string
	// Host is the address the member listens on, for remote traffic and
	// for the membership endpoint, and the address the other members
	// dial it by. Default "127.0.0.1". A Host that is not loopback
	// ("localhost" or a loopback IP) requires TLS (ErrInsecure).
	Host string
	// TLS, when set, makes both of the member's endpoints (the remote's
	// gRPC port and the membership endpoint) speak mutual TLS: a peer
	// must present a certificate signed by RootCAs (or ClientCAs, when
	// set), and the member presents Certificates both when it serves
	// and when it dials, verifying the peer's certificate against
	// RootCAs and the address it dials. Build it with LoadMutualTLS.
	// Nil: plain, allowed on loopback only. The etcd membership's own
	// TLS is Etcd.Config.TLS.
	TLS *tls.Config
	// Port is the remote (gRPC) port of this member. Required.
	Port int
	// ProviderPort is the port of this member's membership (automanaged
	// health) endpoint. Required unless Etcd is set.
	ProviderPort int
	// Peers are the membership endpoints (host:port) of every member,
	// this one included. Required unless Etcd is set.
	Peers []string
	// Etcd, when set, makes the membership protoactor's etcd provider
	// (production) instead of automanaged (a static peer list; tests and
	// the local demo). A killed member is then noticed when its lease
	// expires (3 s).
	Etcd *EtcdMembership
	// RefreshTTL is how often the membership provider polls the peers; a
	// dead member is noticed within about one period. Default 500 ms.
	RefreshTTL time.Duration
	// HeartbeatExpiration is how long gossip waits for a member's
	// heartbeat before blocking it (protoactor's default, 20 s, would
	// delay failover). Default 5 s.
	HeartbeatExpiration time.Duration
	// CallTimeout caps a call that reaches another member when the
	// caller's context has no deadline. Default 30 s.
	CallTimeout time.Duration
	// Labels describe this member: a server whose Nodes selector names
	// one of them may run here (see Server.Nodes).
	Labels map[string]string
	// Local configures the member-local supervision core (its Logger is
	// replaced by Logger).
	Local actors.Options
	// Logger receives what the member and protoactor log. The zero value
	// logs nothing. Nothing is ever written to stdout.
	Logger zerolog.Logger
	// OnEvent, when set, receives the member's own events (activated,
	// ready, released). It is called from the member's goroutines and
	// must not block.
	OnEvent func(Event)
	// OnPoolChanged, when set, is told that the cluster-wide pool (what
	// Overview returns) may have changed: a server of member (an id)
	// changed state or tools, or, with member "", the topology changed.
	// It is called from the member's goroutines and must not block; a
	// host re-reads the pool with Overview (see poolwatch.go).
	OnPoolChanged func(member string)
}

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = "mcpvisor"
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.RefreshTTL <= 0 {
		o.RefreshTTL = 500 * time.Millisecond
	}
	if o.HeartbeatExpiration <= 0 {
		o.HeartbeatExpiration = 5 * time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
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
		if len(o.Etcd.Config.Endpoints) == 0 {
			return fmt.Errorf("%w: Etcd.Config.Endpoints is empty", ErrStart)
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

// Member is one member of a cluster of mcpvisor supervisors.
//
// Concurrency: every method is safe for concurrent use. The configured
// set is guarded by mu; the grain actors, the placement worker, the
// reconciler and the local event pump are the member's own goroutines,
// all ended by Close.
type Member struct {
	opts     Options
	log      zerolog.Logger
	id       string
	local    *actors.System
	sys      *actor.ActorSystem
	c        *pcluster.Cluster
	provider membership

	mu       sync.Mutex
	servers  map[string]Server // the cluster's configured set
	draining bool              // guarded by mu: no new calls
	inflight sync.WaitGroup    // calls running on this member (Add under mu)
	// lastRefusal is when a call was last refused because the member
	// drains (Unix nanoseconds).
	lastRefusal atomic.Int64

	placement *placementQueue
	grains    *grains // the grains that run here (handover.go)
	removed   *removals
	fenceOnce sync.Once
	fenced    chan struct{} // closed by fence (fence.go)
	reconcile *reconciler
	pushWake  chan struct{} // wakes the pusher (poolwatch.go)
	lookup    *lookup
	departed  *departures // fails the calls in flight on a member that left

	stopCtx  context.Context // ends when Close starts
	stop     context.CancelFunc
	bg       sync.WaitGroup // the member's goroutines
	left     atomic.Bool
	closeMu  sync.Mutex
	closeErr error
	closed   bool
}

// Start starts the member-local supervision core, joins the cluster and
// returns once the member is part of it (protoactor waits about a second
// in its start). The member runs no server until SetServers names some
// and the cluster places them here.
func Start(opts Options) (m *Member, err error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	tlsPair, err := mutualTLS(opts.TLS)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	if !oneMemberPerProcess.TryLock() {
		return nil, fmt.Errorf("%w: %w", ErrStart, ErrMemberRunning)
	}
	defer func() {
		if err != nil {
			oneMemberPerProcess.Unlock()
		}
	}()
	local := opts.Local
	local.Logger = opts.Logger
	ls, err := actors.Start(local)
	if err != nil {
		return nil, fmt.Errorf("%w: local supervisor: %w", ErrStart, err)
	}
	m = &Member{
		opts:     opts,
		log:      opts.Logger.With().Str("component", "cluster").Logger(),
		local:    ls,
		servers:  map[string]Server{},
		pushWake: make(chan struct{}, 1),
		lookup:   newLookup(),
		departed: newDepartures(),
		grains:   newGrains(),
		fenced:   make(chan struct{}),
	}
	m.removed = newRemovals(m)
	m.stopCtx, m.stop = context.WithCancel(context.Background())
	m.sys = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return actors.ProtoactorLogger(opts.Logger) }),
		actor.WithDeadLetterRequestLogging(false),
		actor.WithDeadLetterThrottleInterval(100*time.Millisecond),
	)
	m.id = m.sys.ID
	kindNames, err := memberKinds(opts.Labels)
	if err != nil {
		m.abort()
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	m.provider, err = newMembership(opts, tlsPair, m.log, func() *automanaged.NodeModel {
		return automanaged.NewNode(opts.Name, m.sys.ID, opts.Host, opts.Port, opts.ProviderPort, kindNames)
	})
	if err != nil {
		m.abort()
		return nil, err
	}
	m.placement = newPlacementQueue(m)
	m.reconcile = newReconciler(m)
	grainProps := actor.PropsFromProducer(func() actor.Actor { return &grain{m: m} })
	var kinds []*pcluster.Kind
	for _, k := range kindNames {
		kinds = append(kinds, pcluster.NewKind(k, grainProps))
	}
	cfg := pcluster.Configure(opts.Name, m.provider, m.lookup,
		// A member's overview answer and pool snapshot are one message of
		// ~2.3 KB per server: over gRPC's default 4 MiB receive limit from
		// ~1,800 servers per member, which breaks the stream between members
		// (bench/results/2026-11-25-cluster). A stop-gap until they are paged.
		remote.Configure(opts.Host, opts.Port, remoteOptions(tlsPair)...),
		pcluster.WithKinds(kinds...),
		pcluster.WithHeartbeatExpiration(opts.HeartbeatExpiration),
		pcluster.WithRequestLog(false),
	)
	m.c = pcluster.New(m.sys, cfg)
	// Subscribe before the member starts, so that no topology is missed.
	m.sys.EventStream.Subscribe(func(evt any) {
		if t, ok := evt.(*pcluster.ClusterTopology); ok {
			m.departed.left(t.Left)
			m.removed.topologyChanged(t)
			m.reconcile.topologyChanged(t)
			m.poolChanged("")
		}
	})
	if _, err := m.sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &overviewActor{m: m} }), overviewActorName); err != nil {
		m.provider.withdraw()
		m.abort()
		return nil, fmt.Errorf("%w: overview actor: %w", ErrStart, err)
	}
	if _, err := m.sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &memberActor{m: m} }), memberActorName); err != nil {
		m.provider.withdraw()
		m.abort()
		return nil, fmt.Errorf("%w: member actor: %w", ErrStart, err)
	}
	if err := startMember(m.c); err != nil {
		m.provider.withdraw()
		m.abort()
		return nil, err
	}
	m.bg.Add(5)
	routine.Go("cluster.removals", func() { defer m.bg.Done(); m.removed.run(m.stopCtx) })
	routine.Go("cluster.pusher", func() { defer m.bg.Done(); m.runPusher(m.stopCtx) })
	routine.Go("cluster.placement", func() { defer m.bg.Done(); m.placement.run(m.stopCtx) })
	routine.Go("cluster.reconciler", func() { defer m.bg.Done(); m.reconcile.run(m.stopCtx) })
	events := m.local.Subscribe(m.stopCtx, false, 0, 4096)
	routine.Go("cluster.events", func() { defer m.bg.Done(); m.pumpLocalEvents(events) })
	return m, nil
}

// remoteOptions are the remote's gRPC options: the message size limit,
// and with tlsPair mutual TLS on both the server and the dialled side
// (else protoactor's default, plain).
func remoteOptions(tlsPair *tlsConfigs) []remote.ConfigOption {
	server := []grpc.ServerOption{grpc.MaxRecvMsgSize(maxMessageBytes)}
	if tlsPair == nil {
		return []remote.ConfigOption{remote.WithServerOptions(server...)}
	}
	return []remote.ConfigOption{
		remote.WithServerOptions(append(server, tlsPair.grpcServerOption())...),
		remote.WithDialOptions(tlsPair.grpcDialOption()),
	}
}

// startMember runs protoactor's StartMember, which panics on a listen or
// provider error, and turns the panic into an ErrStart.
func startMember(c *pcluster.Cluster) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrStart, r)
		}
	}()
	c.StartMember()
	return nil
}

// abort undoes a Start that failed half way.
func (m *Member) abort() {
	m.stop()
	m.sys.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = m.local.Close(ctx)
}

// ID is the member's id in the cluster (protoactor's member id; a
// restarted process gets a new one).
func (m *Member) ID() string { return m.id }

// Address is the member's remote address (host:port).
func (m *Member) Address() string { return m.sys.Address() }

// Local is the member-local supervision core: it holds exactly the
// servers placed on this member.
func (m *Member) Local() *actors.System { return m.local }

// SetServers makes servers the cluster's configured set, as this member
// sees it (every member loads the same config). Servers this member owns
// are activated, those it runs get their changed config, and those no
// longer configured are released. A server whose Nodes selector is bad
// is left out, and named in the error (errors.Is ErrSelector).
func (m *Member) SetServers(servers map[string]Server) error {
	var bad []error
	servers = maps.Clone(servers)
	for name, s := range servers {
		if _, err := kindOf(s.Nodes); err != nil {
			bad = append(bad, fmt.Errorf("server %q: %w", name, err))
			delete(servers, name)
		}
	}
	m.mu.Lock()
	old := m.servers
	m.servers = maps.Clone(servers)
	m.mu.Unlock()
	for name := range old {
		if _, still := servers[name]; !still {
			m.placement.push(name, false)
		}
	}
	// The grains live here get their (new or changed) config: a grain may
	// have started before its name was configured (a call reaches a
	// member as soon as it is in the topology, before its host called
	// SetServers). Unchanged servers are left alone by PatchServers.
	for _, name := range m.placement.liveNames() {
		if _, ok := servers[name]; ok {
			m.placement.push(name, true)
		}
	}
	m.reconcile.configChanged()
	return errors.Join(bad...)
}

// config returns the configured server name.
func (m *Member) config(name string) (actors.ServerConfig, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.servers[name]
	return s.ServerConfig, ok
}

// kind returns the grain kind of the configured server name.
func (m *Member) kind(name string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.servers[name]
	if !ok {
		return "", false
	}
	k, err := kindOf(s.Nodes)
	return k, err == nil
}

// configured returns the configured names.
func (m *Member) configured() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.servers))
	for n := range m.servers {
		names = append(names, n)
	}
	return names
}

// emit delivers a member event to Options.OnEvent.
func (m *Member) emit(t EventType, server string) {
	if m.opts.OnEvent != nil {
		m.opts.OnEvent(Event{Type: t, Server: server, Member: m.id, Time: time.Now()})
	}
}

// pumpLocalEvents turns the local System's ready transitions into
// member events, and its changes of the pool into pushes to the other
// members (poolwatch.go).
func (m *Member) pumpLocalEvents(events <-chan actors.Event) {
	for ev := range events {
		if ev.Type == actors.EventServerState && ev.State == actors.StateReady && ev.Previous != actors.StateReady {
			m.emit(EventReady, ev.Server)
		}
		if poolChanging(ev.Type) {
			m.poolChanged(m.id)
			m.signalPush()
		}
	}
}

// enter admits a call on this member, or says it is draining.
func (m *Member) enter() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.draining {
		m.lastRefusal.Store(time.Now().UnixNano())
		return false
	}
	m.inflight.Add(1)
	return true
}

// isDraining says whether the member takes no new calls and places no
// new servers (Leave or Close started).
func (m *Member) isDraining() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.draining
}

// Close leaves the cluster without draining (use Leave first for a
// graceful hand-over), closes the local System (every server's shutdown
// ladder) and stops the member's goroutines. It is idempotent.
func (m *Member) Close(ctx context.Context) error {
	m.closeMu.Lock()
	defer m.closeMu.Unlock()
	if m.closed {
		return m.closeErr
	}
	m.closed = true
	m.mu.Lock()
	m.draining = true
	m.mu.Unlock()
	if !m.left.Swap(true) {
		m.provider.withdraw()
		m.c.Shutdown(false)
		// Shutdown(false) leaves the provider running: its membership
		// poll would go on for ever.
		_ = m.provider.Shutdown(false)
	}
	m.provider.settle(ctx)
	m.stop()
	err := m.local.Close(ctx)
	done := make(chan struct{})
	go func() { m.bg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.Join(err, fmt.Errorf("mcpvisor cluster: member goroutines still running: %w", ctx.Err()))
	}
	m.closeErr = err
	oneMemberPerProcess.Unlock()
	return err
}

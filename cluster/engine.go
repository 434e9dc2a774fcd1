package cluster

import (
	"context"
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

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/internal/routine"
)

// grainKind is the grain kind of a supervised MCP server; a grain's identity
// is the server's name.
const grainKind = "mcpserver"

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

// engine is a Member's place in the protoactor cluster: the actor
// system, the grains, placement, calls across members and leave; its
// parts fencing (fence.go) and poolWatch (poolwatch.go) fence a cut-off
// member and keep the others told of this member's pool.
//
// Concurrency: every method is safe for concurrent use. The configured
// set is guarded by mu; the grain actors, the placement worker, the
// reconciler, the pusher, the removals and the local event pump are the
// engine's own goroutines (bg), all ended by close.
type engine struct {
	opts     Options
	log      zerolog.Logger
	id       string
	local    *mcpvisor.Supervisor // runs the servers placed here
	sys      *actor.ActorSystem
	c        *pcluster.Cluster
	provider membership

	mu       sync.Mutex
	servers  map[string]mcpvisor.ServerConfig // the cluster's configured set
	draining bool                             // guarded by mu: no new calls
	inflight sync.WaitGroup                   // calls running on this member (Add under mu)
	// lastRefusal is when a call was last refused because the member
	// drains (Unix nanoseconds).
	lastRefusal atomic.Int64

	placement *placementQueue
	grains    *grains // the grains that run here (handover.go)
	// fencing keeps the members seen leave (written from protoactor's
	// event stream, read by the removals goroutine, under its own lock)
	// and fences this member once (fence.go).
	fencing   *fencing
	reconcile *reconciler
	// poolWatch tells the host of pool changes and wakes the pusher
	// goroutine, which alone sends this member's snapshot (poolwatch.go).
	poolWatch *poolWatch
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

// startEngine starts the member-local Supervisor, joins the cluster and
// returns once the member is part of it (protoactor waits about a second
// in its start). It runs no server until setServers names some and the
// cluster places them here. opts have their defaults.
func startEngine(opts Options, onPoolChanged func(member string)) (m *engine, err error) {
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
	ls, err := mcpvisor.Start(context.Background(), opts.Supervisor)
	if err != nil {
		return nil, fmt.Errorf("%w: local supervisor: %w", ErrStart, err)
	}
	m = &engine{
		opts:     opts,
		log:      opts.Supervisor.Logger.With().Str("component", "cluster").Logger(),
		local:    ls,
		servers:  map[string]mcpvisor.ServerConfig{},
		lookup:   newLookup(),
		departed: newDepartures(),
		grains:   newGrains(),
	}
	m.poolWatch = newPoolWatch(m, onPoolChanged)
	m.fencing = newFencing(m)
	m.stopCtx, m.stop = context.WithCancel(context.Background())
	m.sys = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return actors.ProtoactorLogger(opts.Supervisor.Logger) }),
		actor.WithDeadLetterRequestLogging(false),
		actor.WithDeadLetterThrottleInterval(100*time.Millisecond),
	)
	m.id = m.sys.ID
	kindNames, err := memberKinds(opts.Labels)
	if err != nil {
		m.abort()
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	m.provider, err = newMembership(opts, tlsPair, m.log, func() any {
		return m.fencing.health(automanaged.NewNode(opts.Name, m.sys.ID, opts.Host, opts.Port, opts.ProviderPort, kindNames))
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
			m.departed.changed(t)
			m.fencing.topologyChanged(t)
			m.reconcile.topologyChanged(t)
			m.poolWatch.changed("")
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
	if _, err := m.sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &authorizationsActor{m: m} }), authorizationsActorName); err != nil {
		m.provider.withdraw()
		m.abort()
		return nil, fmt.Errorf("%w: authorizations actor: %w", ErrStart, err)
	}
	if err := startMember(m.c); err != nil {
		m.provider.withdraw()
		m.abort()
		return nil, err
	}
	m.bg.Add(5)
	routine.Go("cluster.removals", func() { defer m.bg.Done(); m.fencing.run(m.stopCtx) })
	routine.Go("cluster.pusher", func() { defer m.bg.Done(); m.poolWatch.run(m.stopCtx) })
	routine.Go("cluster.placement", func() { defer m.bg.Done(); m.placement.run(m.stopCtx) })
	routine.Go("cluster.reconciler", func() { defer m.bg.Done(); m.reconcile.run(m.stopCtx) })
	events := m.local.Subscribe(m.stopCtx, mcpvisor.BufferSize(4096))
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
func (m *engine) abort() {
	m.stop()
	m.sys.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = m.local.Close(ctx)
}

// setServers makes servers the cluster's configured set, as this member
// sees it (Member.SetServers).
func (m *engine) setServers(servers map[string]mcpvisor.ServerConfig) error {
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
func (m *engine) config(name string) (mcpvisor.ServerConfig, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.servers[name]
	return s, ok
}

// kind returns the grain kind of the configured server name.
func (m *engine) kind(name string) (string, bool) {
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
func (m *engine) configured() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.servers))
	for n := range m.servers {
		names = append(names, n)
	}
	return names
}

// emit delivers a member event to Options.OnMemberEvent.
func (m *engine) emit(t MemberEventType, server string) {
	if m.opts.OnMemberEvent != nil {
		m.opts.OnMemberEvent(MemberEvent{Type: t, Server: server, Member: m.id, Time: time.Now()})
	}
}

// pumpLocalEvents turns the local Supervisor's ready transitions into
// member events, and its changes of the pool into pushes to the other
// members (poolwatch.go).
func (m *engine) pumpLocalEvents(events <-chan mcpvisor.Event) {
	for ev := range events {
		if st, ok := ev.(*mcpvisor.ServerStateEvent); ok && st.State == mcpvisor.StateReady && st.Previous != mcpvisor.StateReady {
			m.emit(MemberReady, st.Server)
		}
		if poolChanging(ev.Header().Type) {
			m.poolWatch.changed(m.id)
			m.poolWatch.signalPush()
		}
	}
}

// enter admits a call on this member, or says it is draining.
func (m *engine) enter() bool {
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
func (m *engine) isDraining() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.draining
}

// close leaves the cluster without draining (leave first for a graceful
// hand-over), closes the local Supervisor (every server's shutdown
// ladder) and stops the engine's goroutines. It is idempotent.
func (m *engine) close(ctx context.Context) error {
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

package mcpvisor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mcpvisor/mcpvisor/actors/cluster"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// ErrClusterStart: a ClusterMember could not start (bad options, a port
// in use, a second member in this process).
var ErrClusterStart = cluster.ErrStart

// ErrClusterInsecure: a ClusterMember would listen beyond loopback
// without ClusterOptions.TLS (returned wrapped in ErrClusterStart).
var ErrClusterInsecure = cluster.ErrInsecure

// ErrClusterTLS: the member's TLS files or ClusterOptions.TLS cannot make
// mutual TLS.
var ErrClusterTLS = cluster.ErrTLSConfig

// LoadClusterTLS reads a member's certificate and key and the CA that
// signs every member's certificate (PEM files) into the configuration
// for ClusterOptions.TLS. The certificate serves and dials, so it must
// allow both uses and name the member's Host.
func LoadClusterTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	return cluster.LoadMutualTLS(certFile, keyFile, caFile)
}

// ClusterOptions configure a ClusterMember. The zero value of each field
// but Port, ProviderPort and Peers is a useful default.
type ClusterOptions struct {
	// Name is the cluster's name: members of different names ignore each
	// other. Default "mcpvisor".
	Name string
	// Host is the address the member listens on (remote traffic and the
	// membership endpoint) and the others dial it by. Default
	// "127.0.0.1". A Host that is not loopback requires TLS
	// (ErrClusterInsecure).
	Host string
	// TLS, when set, makes both of the member's endpoints speak mutual
	// TLS: only a peer with a certificate signed by the members' CA is
	// served, and the member presents its certificate when it dials
	// (see LoadClusterTLS). Nil: plain, loopback only.
	TLS *tls.Config
	// Port is the member's remote (gRPC) port; ProviderPort its
	// membership endpoint's. Both required.
	Port, ProviderPort int
	// Peers are the membership endpoints (host:port) of every member,
	// this one included (automanaged membership: tests, a local demo).
	Peers []string
	// Etcd, when set, makes the membership protoactor's etcd provider
	// over this client configuration (production); ProviderPort and
	// Peers are then unused. A killed member is noticed when its lease
	// expires (3 s).
	Etcd *clientv3.Config
	// EtcdPrefix starts the membership's etcd keys (default
	// "/mcpvisor-cluster").
	EtcdPrefix string
	// Labels describe this member: a server whose ServerConfig.Nodes
	// names one of them may run here.
	Labels map[string]string
	// Supervisor configures the member-local supervisor that runs the
	// servers placed on this member (Logger, OAuth, timeouts, …).
	// Builtins are not offered in cluster mode.
	Supervisor Options
	// Refresh is how often the member re-reads the cluster-wide pool
	// when no member signalled a change (a safety net: changes are
	// pushed). Default 1 s.
	Refresh time.Duration
	// OnMemberEvent, when set, receives what this member did with a
	// server (activated, ready, released). It is called from the
	// member's goroutines and must not block.
	OnMemberEvent func(MemberEvent)
}

// MemberEvent is one thing a cluster member did with a server.
type MemberEvent struct {
	// Type is "activated" (the server's grain started on this member),
	// "ready" (its connection is up), "released" (it left this member)
	// or "fenced" (Server empty: the cluster removed this member, see
	// ClusterMember.Fenced).
	Type   string    `json:"type"`
	Server string    `json:"server"`
	Member string    `json:"member"`
	Time   time.Time `json:"time"`
}

// ClusterMember is one member of a cluster of supervisors (package
// actors/cluster, on protoactor's cluster): every configured server runs
// on exactly one member, and each member offers the cluster-wide pool.
// Tools, Status and Subscribe show every server of the cluster (Status
// names the member that runs each), and CallTool reaches the member that
// runs the tool's server, with the typed errors of a Supervisor. Prompts
// and resources are not offered across members yet (empty lists).
//
// Concurrency: every method is safe for concurrent use. The pool view is
// replaced whole by the refresher goroutine (one owner) and read under
// viewMu; the event bus guards itself.
type ClusterMember struct {
	m    *cluster.Member
	opts ClusterOptions
	bus  *clusterBus

	viewMu sync.Mutex
	view   clusterView
	// known maps every pool name ever seen to its server and tool, so
	// that a call during a re-homing (the server's tools briefly absent
	// from the view) still reaches the server; pruned by SetServers.
	known map[string]toolTarget

	wake chan struct{}
	stop context.CancelFunc
	done chan struct{}
}

// toolTarget is the server and the server's own name of a pool tool.
type toolTarget struct{ server, tool string }

// StartClusterMember starts a member: its local supervisor, its place in
// the cluster (it returns once joined, about a second), and the
// refresher of its cluster-wide pool. It runs no server until
// SetServers names some.
func StartClusterMember(opts ClusterOptions) (*ClusterMember, error) {
	if opts.Refresh <= 0 {
		opts.Refresh = time.Second
	}
	cm := &ClusterMember{
		opts:  opts,
		bus:   newClusterBus(opts.Supervisor.EventBuffer),
		known: map[string]toolTarget{},
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
	var onEvent func(cluster.Event)
	if opts.OnMemberEvent != nil {
		onEvent = func(e cluster.Event) {
			opts.OnMemberEvent(MemberEvent{Type: string(e.Type), Server: e.Server, Member: e.Member, Time: e.Time})
		}
	}
	var etcdMembership *cluster.EtcdMembership
	if opts.Etcd != nil {
		etcdMembership = &cluster.EtcdMembership{Config: *opts.Etcd, Prefix: opts.EtcdPrefix}
	}
	m, err := cluster.Start(cluster.Options{
		Etcd: etcdMembership,
		Name: opts.Name, Host: opts.Host, Port: opts.Port, ProviderPort: opts.ProviderPort, TLS: opts.TLS,
		Peers: opts.Peers, Labels: opts.Labels, Local: opts.Supervisor.plain(),
		Logger: opts.Supervisor.Logger, OnEvent: onEvent,
		OnPoolChanged: func(string) { cm.signal() },
	})
	if err != nil {
		return nil, err
	}
	cm.m = m
	ctx, stop := context.WithCancel(context.Background())
	cm.stop = stop
	go cm.refresher(ctx)
	return cm, nil
}

// Fenced is closed when the cluster removed this member: it stopped
// answering long enough (a network partition, a paused process) that
// the others re-homed its servers, and protoactor never lets the same id
// back in. The member has then released every server and left; the host
// should Close it and start a new member to rejoin (supervise exits with
// an error, so that its service manager restarts it).
func (cm *ClusterMember) Fenced() <-chan struct{} { return cm.m.Fenced() }

// ID is the member's id in the cluster (a restarted process gets a new
// one).
func (cm *ClusterMember) ID() string { return cm.m.ID() }

// SetServers makes servers the cluster's configured set as this member
// sees it (every member loads the same config; a reload on every member
// converges). Servers with a bad Nodes selector are left out and named
// in the error.
func (cm *ClusterMember) SetServers(servers map[string]ServerConfig) error {
	set := make(map[string]cluster.Server, len(servers))
	for name, sc := range servers {
		set[name] = cluster.Server{ServerConfig: sc.plain(), Nodes: sc.Nodes}
	}
	err := cm.m.SetServers(set)
	cm.viewMu.Lock()
	for name, t := range cm.known {
		if _, ok := servers[t.server]; !ok {
			delete(cm.known, name)
		}
	}
	cm.viewMu.Unlock()
	cm.signal()
	return err
}

// Tools returns the cluster-wide tool pool (qualified names, sorted), as
// of the member's latest view. The slice is the caller's.
func (cm *ClusterMember) Tools() []Tool {
	cm.viewMu.Lock()
	defer cm.viewMu.Unlock()
	return append([]Tool(nil), cm.view.tools...)
}

// Status returns every server of the cluster with the member that runs
// it (ServerStatus.Member), as of the member's latest view.
func (cm *ClusterMember) Status() []ServerStatus {
	cm.viewMu.Lock()
	defer cm.viewMu.Unlock()
	return append([]ServerStatus(nil), cm.view.status...)
}

// CallTool calls a tool of the cluster-wide pool by its qualified name on
// the member that runs its server, and returns what Supervisor.CallTool
// returns (ErrUnknownTool, *NotReadyError, *ConnectionLostError, …).
// While the server is being re-homed the call waits for its new owner
// until ctx's deadline.
func (cm *ClusterMember) CallTool(ctx context.Context, name string, args any) (*protocol.CallToolResult, error) {
	raw, err := encodeArgs(args)
	if err != nil {
		return nil, fmt.Errorf("mcpvisor: arguments of %s: %w", name, err)
	}
	t, ok := cm.target(name)
	if !ok {
		// A tool added since the last view: look again once.
		cm.refresh(ctx)
		if t, ok = cm.target(name); !ok {
			return nil, fmt.Errorf("%w: %q", ErrUnknownTool, name)
		}
	}
	return hostResult(cm.m.CallTool(ctx, t.server, t.tool, raw))
}

func (cm *ClusterMember) target(name string) (toolTarget, bool) {
	cm.viewMu.Lock()
	defer cm.viewMu.Unlock()
	t, ok := cm.known[name]
	return t, ok
}

// ListPrompts returns no prompts: prompts are not offered across members
// yet.
func (cm *ClusterMember) ListPrompts(string) ([]Prompt, error) { return nil, nil }

// GetPrompt fails with ErrUnknownPrompt: prompts are not offered across
// members yet.
func (cm *ClusterMember) GetPrompt(_ context.Context, name string, _ map[string]string) (*protocol.GetPromptResult, error) {
	return nil, fmt.Errorf("%w: %q (cluster mode offers tools only)", ErrUnknownPrompt, name)
}

// ListResources returns no resources: resources are not offered across
// members yet.
func (cm *ClusterMember) ListResources(string) ([]Resource, []ResourceTemplate, error) {
	return nil, nil, nil
}

// ReadResource fails with ErrUnknownServer: resources are not offered
// across members yet.
func (cm *ClusterMember) ReadResource(_ context.Context, server, _ string) (*protocol.ReadResourceResult, error) {
	return nil, fmt.Errorf("%w: %q (cluster mode offers tools only)", ErrUnknownServer, server)
}

// Subscribe returns the cluster-wide event stream: server_state (a
// server's state or member changed) and tools_changed (its tools in the
// pool changed) for every server of the cluster, numbered by this
// member. FromSequence and BufferSize apply. The channel closes when ctx
// ends or the member closes.
func (cm *ClusterMember) Subscribe(ctx context.Context, opts ...SubscribeOption) <-chan Event {
	var o subscribeOptions
	for _, f := range opts {
		f(&o)
	}
	return cm.bus.subscribe(ctx, o.resume, o.after, o.buffer)
}

// Leave hands this member's servers over to the others (stop taking
// calls, let calls in flight end, release the servers) and leaves the
// cluster. Close afterwards.
func (cm *ClusterMember) Leave(ctx context.Context) error { return cm.m.Leave(ctx) }

// Close leaves the cluster (without draining: Leave first for a graceful
// hand-over), shuts the member's servers down and ends its event stream.
// It is idempotent.
func (cm *ClusterMember) Close(ctx context.Context) error {
	cm.stop()
	select {
	case <-cm.done:
	case <-ctx.Done():
	}
	err := cm.m.Close(ctx)
	cm.bus.close()
	if errors.Is(err, cluster.ErrLeft) {
		return nil
	}
	return err
}

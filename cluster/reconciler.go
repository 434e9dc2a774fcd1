package cluster

import (
	"context"
	"strings"
	"sync"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/mcpvisor/mcpvisor/cluster/internal/wire"
)

// reconciler makes placement active. protoactor activates grains lazily,
// so a server whose member died would stay down until someone called it:
// on every topology change, once the members agree on it, the reconciler
// activates the configured servers this member owns by the cluster's own
// rendezvous hashing (the hashing disthash places with).
//
// Hazard worked around (notes/protoactor.md §6): the topology consensus
// of the pinned protoactor never reports agreement. Its consensus check
// collects the members' states into a slice passed by value
// (consensus_check_builder.go, getValidMemberStates), so it always sees
// none and MemberList.TopologyConsensus stays (0, false) for ever; and
// were it fixed, TryResetConsensus is a no-op, so it would go on
// reporting the previous hash while members converge on a new one. The
// reconciler reads the same gossip state itself (key "topology", one
// entry per member) and acts once every member of the topology gossips
// that topology's hash.
//
// Concurrency: topologyChanged and configChanged are called from any
// goroutine (the first from protoactor's event stream, under its member
// list lock: it only stores and signals); run is the member's reconciler
// goroutine.
type reconciler struct {
	m    *engine
	mu   sync.Mutex
	last *pcluster.ClusterTopology // guarded by mu: the newest topology seen
	wake chan struct{}
}

func newReconciler(m *engine) *reconciler {
	return &reconciler{m: m, wake: make(chan struct{}, 1)}
}

func (r *reconciler) topologyChanged(t *pcluster.ClusterTopology) {
	r.mu.Lock()
	r.last = t
	r.mu.Unlock()
	r.signal()
}

func (r *reconciler) configChanged() { r.signal() }

func (r *reconciler) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *reconciler) latest() *pcluster.ClusterTopology {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// consensusPoll is how often the reconciler looks whether the members
// agree on the newest topology (gossip runs every 300 ms).
const consensusPoll = 50 * time.Millisecond

// resweepEvery is how often the reconciler activates, without a
// topology change, the servers this member owns and runs no grain of.
// Two members that started the same server's grain at once, while their
// topologies differed, each release the other's (handover.go), and a
// grain stopped by a move may find its new owner's reconciler already
// done: the resweep brings such a server back within this period
// instead of at its next call.
const resweepEvery = 5 * time.Second

// run reconciles after each signal, and every resweepEvery, until ctx
// ends.
func (r *reconciler) run(ctx context.Context) {
	resweep := time.NewTicker(resweepEvery)
	defer resweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-resweep.C:
		}
		if r.m.isDraining() {
			continue // leaving or fenced: nothing is placed here any more
		}
		t := r.awaitConsensus(ctx)
		if t == nil {
			continue // ended, or superseded: the next signal retries
		}
		if r.m.fencing.cutOff(ctx, t) {
			r.m.fencing.fence() // the others run the cluster (fence.go)
			continue
		}
		r.activateOwned(ctx, t)
	}
}

// awaitConsensus waits until the members agree on the newest topology
// and returns it, or nil when ctx ends or a newer topology arrives first
// (the wake signal is then pending).
func (r *reconciler) awaitConsensus(ctx context.Context) *pcluster.ClusterTopology {
	tick := time.NewTicker(consensusPoll)
	defer tick.Stop()
	for {
		t := r.latest()
		if t != nil {
			if r.agreedOn(t) {
				return t
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if r.latest() != t {
			continue // a newer topology: wait for agreement on that one
		}
	}
}

// agreedOn reports whether every member of topology t gossips t's hash
// as its own topology.
func (r *reconciler) agreedOn(t *pcluster.ClusterTopology) bool {
	states, err := r.m.c.Gossip.GetState(pcluster.TopologyKey)
	if err != nil {
		return false
	}
	for _, member := range t.Members {
		kv, ok := states[gossipID(member.Id)]
		if !ok || kv.GetValue() == nil {
			return false
		}
		var theirs pcluster.ClusterTopology
		if err := kv.GetValue().UnmarshalTo(&theirs); err != nil || theirs.TopologyHash != t.TopologyHash {
			return false
		}
	}
	return true
}

// activateOwned activates every configured server this member owns in
// t and runs no grain of, a few at a time.
func (r *reconciler) activateOwned(ctx context.Context, t *pcluster.ClusterTopology) {
	rdv := pcluster.NewRendezvous()
	rdv.UpdateMembers(t.Members)
	me := r.m.sys.Address()
	var mine []string
	for _, name := range r.m.configured() {
		kind, ok := r.m.kind(name)
		if ok && r.m.grains.get(name) == nil && rdv.GetByClusterIdentity(pcluster.NewClusterIdentity(name, kind)) == me {
			mine = append(mine, name)
		}
	}
	const workers = 16
	names := make(chan string)
	var wg sync.WaitGroup
	for range min(workers, len(mine)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				r.activate(ctx, name)
			}
		}()
	}
	for _, name := range mine {
		select {
		case names <- name:
		case <-ctx.Done():
		}
	}
	close(names)
	wg.Wait()
}

// activate asks the grain of name to be active (through the cluster, as
// any call would, so that the placement actor spawns it).
func (r *reconciler) activate(ctx context.Context, name string) {
	if ctx.Err() != nil {
		return
	}
	kind, ok := r.m.kind(name)
	if !ok {
		return
	}
	_, err := r.m.c.Request(name, kind, &wire.Activate{},
		pcluster.WithTimeout(5*time.Second),
		pcluster.WithRetryCount(3),
		pcluster.WithRetryAction(retryPause),
		pcluster.WithContext(r.m.sys.Root))
	if err != nil {
		r.m.log.Warn().Err(err).Str("server", name).Msg("activating a server this member owns")
	}
}

// retryPause is the pause between the attempts of one cluster request:
// 50 ms, 100 ms, 150 ms… (protoactor's default sleeps i*i*50
// nanoseconds, which is no pause at all).
func retryPause(i int) int {
	i++
	time.Sleep(time.Duration(i) * 50 * time.Millisecond)
	return i
}

// gossipID is the id gossip keys a member's state by: its actor system's
// id. protoactor's etcd provider names a member "<cluster>@<actor system
// id>" in the topology (automanaged uses the bare id), so that a
// topology member's id is not found among the gossip states as it is.
func gossipID(memberID string) string {
	if i := strings.LastIndexByte(memberID, '@'); i >= 0 {
		return memberID[i+1:]
	}
	return memberID
}

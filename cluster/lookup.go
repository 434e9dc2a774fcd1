package cluster

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/eventstream"
)

// activationTimeout bounds one activation request to the owner's
// placement actor (disthash uses the same).
const activationTimeout = 5 * time.Second

// lookup is disthash's identity lookup with a race-free Get.
//
// Hazard worked around (notes/protoactor.md §6): disthash's Manager
// replaces its rendezvous pointer on each topology event without a lock
// while Get reads it from the caller's goroutine: any cluster.Request
// during a topology change is a data race (-race reports it). lookup
// keeps disthash for everything else (its placement actor spawns and
// stops the grains, answers ActivationRequest, stops moved grains), and
// answers Get itself the way disthash does (the same rendezvous hashing
// over the same members, the same ActivationRequest to the owner's
// placement actor) from a rendezvous it swaps under a lock.
//
// Concurrency: Get is called from any goroutine; the topology handler
// runs on protoactor's event stream publisher.
type lookup struct {
	inner pcluster.IdentityLookup
	c     *pcluster.Cluster
	sub   *eventstream.Subscription
	mu    sync.RWMutex
	rdv   *pcluster.Rendezvous // guarded by mu; nil before the first topology
}

func newLookup() *lookup { return &lookup{inner: disthash.New()} }

// Get returns the PID of the grain, activating it on its owner.
func (l *lookup) Get(ci *pcluster.ClusterIdentity) *actor.PID {
	l.mu.RLock()
	rdv := l.rdv
	l.mu.RUnlock()
	if rdv == nil {
		return nil
	}
	owner := rdv.GetByClusterIdentity(ci)
	if owner == "" {
		return nil
	}
	activator := actor.NewPID(owner, disthash.PartitionActivatorActorName)
	res, err := l.c.ActorSystem.Root.RequestFuture(activator, &pcluster.ActivationRequest{ClusterIdentity: ci}, activationTimeout).Result()
	if err != nil {
		return nil
	}
	if r, ok := res.(*pcluster.ActivationResponse); ok {
		return r.Pid
	}
	return nil
}

// owner returns the address of the member that owns ci by the current
// topology ("" when none does or before the first topology).
func (l *lookup) owner(ci *pcluster.ClusterIdentity) string {
	l.mu.RLock()
	rdv := l.rdv
	l.mu.RUnlock()
	if rdv == nil {
		return ""
	}
	return rdv.GetByClusterIdentity(ci)
}

// RemovePid is disthash's.
func (l *lookup) RemovePid(ci *pcluster.ClusterIdentity, pid *actor.PID) { l.inner.RemovePid(ci, pid) }

// Setup starts disthash and follows the topology.
func (l *lookup) Setup(c *pcluster.Cluster, kinds []string, isClient bool) {
	l.c = c
	l.sub = c.ActorSystem.EventStream.Subscribe(func(evt any) {
		if t, ok := evt.(*pcluster.ClusterTopology); ok {
			rdv := pcluster.NewRendezvous()
			rdv.UpdateMembers(t.Members)
			l.mu.Lock()
			l.rdv = rdv
			l.mu.Unlock()
		}
	})
	l.inner.Setup(c, kinds, isClient)
}

// Shutdown stops following the topology and shuts disthash down.
func (l *lookup) Shutdown() {
	if l.sub != nil {
		l.c.ActorSystem.EventStream.Unsubscribe(l.sub)
		l.sub = nil
	}
	l.inner.Shutdown()
}

package cluster

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"

	"github.com/mcpvisor/mcpvisor/cluster/internal/wire"
	"github.com/mcpvisor/mcpvisor/internal/routine"
)

// A member cut off from the others (a network partition, a paused
// process) is dropped from their topology and its servers are re-homed;
// protoactor blocks its id for ever. When it comes back it cannot know:
// its own topology still holds everyone, it goes on running the servers
// that moved, and once gossip's heartbeats expire it blocks the others
// and activates every server (a split brain). protoactor ignores the
// "blocked" answer its remote gets (endpoint_writer.go: "TODO: handle
// blocked status"). So the members that saw it leave tell it: every
// second they send Removed with its id to its address; a member that
// receives its own id is fenced: it releases every server and leaves.

// removedEvery is how often the removed members are told.
const removedEvery = time.Second

// maxRemoved bounds the removed members a member keeps telling (the
// newest are kept).
const maxRemoved = 64

// fencing is the member's side of a partition that healed: it keeps the
// members this member saw leave the topology, to tell them so (a member
// killed for good costs one failed connection attempt per second until a
// member reuses its address or maxRemoved newer ones push it out), judges
// whether this member is the one that was cut off (cutOff, removedBy),
// and fences it.
//
// Concurrency: topologyChanged is called from protoactor's event stream;
// run is the member's removals goroutine; mu guards gone. fence may be
// called from any goroutine (the reconciler, a removedBy goroutine): once
// closes fenced, which is read only after that.
type fencing struct {
	m      *engine
	mu     sync.Mutex
	gone   []removedMember // oldest first
	once   sync.Once
	fenced chan struct{} // closed by fence
}

type removedMember struct {
	id, addr string
	at       time.Time // when this member saw it leave
}

func newFencing(m *engine) *fencing {
	return &fencing{m: m, fenced: make(chan struct{})}
}

// topologyChanged records the members that left t and forgets those
// whose address a member of t now uses.
func (f *fencing) topologyChanged(t *pcluster.ClusterTopology) {
	inUse := map[string]bool{}
	for _, member := range t.Members {
		inUse[member.Address()] = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	for _, member := range t.Left {
		f.gone = append(f.gone, removedMember{id: member.Id, addr: member.Address(), at: now})
	}
	kept := f.gone[:0]
	for _, g := range f.gone {
		if !inUse[g.addr] {
			kept = append(kept, g)
		}
	}
	f.gone = kept
	if n := len(f.gone); n > maxRemoved {
		f.gone = append([]removedMember(nil), f.gone[n-maxRemoved:]...)
	}
}

// run tells every removed member, every removedEvery, until ctx ends.
func (f *fencing) run(ctx context.Context) {
	tick := time.NewTicker(removedEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.fenced:
			// Fenced, this member's view is the losing side's: the
			// members it saw leave are the ones running the cluster.
			return
		case <-tick.C:
		}
		f.mu.Lock()
		gone := append([]removedMember(nil), f.gone...)
		f.mu.Unlock()
		for _, g := range gone {
			f.m.sys.Root.Send(actor.NewPID(g.addr, memberActorName), &wire.Removed{Member: gossipID(g.id)})
		}
	}
}

// fence is what a member does on learning that the cluster removed it:
// it takes no call and places nothing from now on, releases every
// server it runs at once (their new owners run them already), leaves,
// and closes Fenced. Its host must restart it to rejoin (a new id).
func (f *fencing) fence() {
	m := f.m
	f.once.Do(func() {
		m.log.Error().Msg("the cluster removed this member (it did not answer for a while): releasing every server and leaving; restart it to rejoin")
		m.mu.Lock()
		m.draining = true
		m.mu.Unlock()
		for _, name := range m.placement.liveNames() {
			m.placement.push(name, false)
		}
		close(f.fenced)
		m.emit(MemberFenced, "")
		routine.Go("cluster.fence", func() {
			ctx, cancel := context.WithTimeout(m.stopCtx, 30*time.Second)
			defer cancel()
			if err := m.leave(ctx); err != nil {
				m.log.Warn().Err(err).Msg("leaving after the cluster removed this member")
			}
		})
	})
}

// removedBy handles a Removed naming this member: it fences, unless
// every member that says so (on its membership endpoint) is one this
// member saw leave before that member saw this one leave: a paused
// member come back, whose stale view dropped this member only once it
// ran again, and which the Removed this member sends will fence (the
// rule cutOff applies to a tie). It asks the peers, so it runs on a
// goroutine of its own, never in the member actor.
func (f *fencing) removedBy(ctx context.Context) {
	m := f.m
	if removed := f.removedIDs(); len(removed) > 0 && m.opts.Etcd == nil {
		sayers, stale := 0, 0
		for id, saw := range f.aliveIDs(ctx) {
			ago, ok := saw[m.id]
			if !ok {
				continue
			}
			sayers++
			if ours, had := removed[id]; had && ours > ago {
				stale++
			}
		}
		if sayers > 0 && stale == sayers {
			m.log.Warn().Msg("told this member was removed by a member it saw leave first (that member was the one cut off): ignored")
			return
		}
	}
	if ctx.Err() != nil {
		return // closing: the asking ended early, and there is nothing left to fence
	}
	f.fence()
}

// removedIDs returns the ids of the members this member saw leave (and
// still keeps telling), each with how long ago it saw it.
func (f *fencing) removedIDs() map[string]time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	ids := make(map[string]time.Duration, len(f.gone))
	for _, g := range f.gone {
		ids[gossipID(g.id)] = now.Sub(g.at)
	}
	return ids
}

// healthAnswer is what a member's membership endpoint answers: its
// NodeModel (what the peers' polls read), and the members it saw leave
// with how long ago in milliseconds (what cutOff reads on both sides of
// a partition that healed).
type healthAnswer struct {
	*automanaged.NodeModel
	RemovedAgoMs map[string]int64 `json:"removedAgoMs,omitempty"`
}

// health is the member's healthAnswer now.
func (f *fencing) health(node *automanaged.NodeModel) any {
	a := healthAnswer{NodeModel: node}
	for id, ago := range f.removedIDs() {
		if a.RemovedAgoMs == nil {
			a.RemovedAgoMs = map[string]int64{}
		}
		a.RemovedAgoMs[id] = max(ago.Milliseconds(), 1)
	}
	return a
}

// healthTimeout bounds one membership endpoint's answer in cutOff.
const healthTimeout = time.Second

// cutOff reports whether this member is on the losing side of a
// partition, for the static peer list (automanaged) membership: the
// members that left its topology t but still answer on their membership
// endpoint with the same id are alive, only cut off from it (gossip's
// heartbeats expired, and it blocked them: they blocked it too). When
// they outnumber t's members (a tie goes to the side with the smallest
// id), they run the cluster, and this member must not activate their
// servers. The reconciler asks before it activates anything; Removed
// usually fences such a member sooner.
func (f *fencing) cutOff(ctx context.Context, t *pcluster.ClusterTopology) bool {
	if f.m.opts.Etcd != nil {
		return false
	}
	removed := f.removedIDs()
	if len(removed) == 0 {
		return false
	}
	alive := f.aliveIDs(ctx)
	inside := map[string]bool{}
	for _, member := range t.Members {
		inside[gossipID(member.Id)] = true
	}
	var outside []string
	for id := range removed {
		if _, up := alive[id]; up && !inside[id] {
			outside = append(outside, id)
		}
	}
	if len(outside) == 0 {
		return false
	}
	if len(outside) != len(inside) {
		return len(outside) > len(inside)
	}
	// A tie (two members, a paused one come back): the side that saw the
	// other leave first has run the cluster since; the other was the one
	// cut off (its own view drops the others only once it has run again
	// for a while, and until then it says it saw nobody leave). Each side
	// measures "how long ago" on its own clock.
	ours, theirs := time.Duration(0), time.Duration(0)
	for _, id := range outside {
		ours = max(ours, removed[id])
		theirs = max(theirs, alive[id][f.m.id])
	}
	if ours != theirs {
		return theirs > ours
	}
	smallest := outside[0]
	for _, id := range outside {
		smallest = min(smallest, id)
	}
	for id := range inside {
		if id < smallest {
			return false
		}
	}
	return true
}

// aliveIDs asks every peer's membership endpoint (Options.Peers) for the
// id of the member behind it, in parallel, each bounded by
// healthTimeout: the ids that answered, each with the members it saw
// leave and how long ago (healthAnswer).
func (f *fencing) aliveIDs(ctx context.Context) map[string]map[string]time.Duration {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	var mu sync.Mutex
	alive := map[string]map[string]time.Duration{}
	var wg sync.WaitGroup
	for _, peer := range f.m.opts.Peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+peer+"/_health", nil)
			if err != nil {
				return
			}
			resp, err := healthClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			var node struct {
				ID           string           `json:"id"`
				RemovedAgoMs map[string]int64 `json:"removedAgoMs"`
			}
			if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&node) != nil || node.ID == "" {
				return
			}
			saw := make(map[string]time.Duration, len(node.RemovedAgoMs))
			for id, ms := range node.RemovedAgoMs {
				saw[id] = time.Duration(ms) * time.Millisecond
			}
			mu.Lock()
			alive[node.ID] = saw
			mu.Unlock()
		}()
	}
	wg.Wait()
	return alive
}

// healthClient asks the peers' membership endpoints (no proxy: they are
// cluster-internal addresses).
var healthClient = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

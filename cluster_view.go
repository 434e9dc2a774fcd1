package mcpvisor

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/actors/cluster"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// overviewTimeout bounds one re-read of the cluster-wide pool.
const overviewTimeout = 2 * time.Second

// clusterView is the cluster-wide pool as a member last read it.
type clusterView struct {
	tools  []Tool         // sorted by name
	status []ServerStatus // sorted by name
	// byServer holds each server's state, member and tools (pool name →
	// definition), for the diffs.
	byServer map[string]serverView
}

type serverView struct {
	state  State
	member string
	tools  map[string]protocol.Tool
}

// signal asks the refresher to re-read the pool (coalesced).
func (cm *ClusterMember) signal() {
	select {
	case cm.wake <- struct{}{}:
	default:
	}
}

// refresher re-reads the pool on each signal and every Refresh, until
// ctx ends.
func (cm *ClusterMember) refresher(ctx context.Context) {
	defer close(cm.done)
	t := time.NewTicker(cm.opts.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-cm.wake:
		case <-t.C:
		}
		cm.refresh(ctx)
	}
}

// refresh reads the cluster-wide pool, replaces the view and publishes
// what changed. Members that did not answer keep their servers out of
// the view until they answer again (a dead member's servers come back
// with their new owner).
func (cm *ClusterMember) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, overviewTimeout)
	defer cancel()
	ov, err := cm.m.Overview(ctx)
	if err != nil {
		return
	}
	next := viewOf(ov)
	cm.viewMu.Lock()
	prev := cm.view
	cm.view = next
	for _, t := range next.tools {
		cm.known[t.Name] = toolTarget{server: t.Server, tool: t.Definition.Name}
	}
	cm.viewMu.Unlock()
	cm.publishDiff(prev, next)
}

// viewOf converts an Overview.
func viewOf(ov cluster.Overview) clusterView {
	v := clusterView{byServer: map[string]serverView{}}
	var pool []actors.Tool
	for _, t := range ov.Tools {
		pool = append(pool, t.Tool)
	}
	v.tools = toolsOf(pool)
	var sts []actors.ServerStatus
	members := map[string]string{}
	for _, s := range ov.Servers {
		if _, dup := members[s.Name]; dup {
			continue // two members in the middle of a hand-over: the first wins
		}
		members[s.Name] = s.Member
		sts = append(sts, s.ServerStatus)
	}
	v.status = statuses(sts, pool)
	for i := range v.status {
		st := &v.status[i]
		st.Member = members[st.Name]
		sv := serverView{state: st.State, member: st.Member, tools: map[string]protocol.Tool{}}
		v.byServer[st.Name] = sv
	}
	for _, t := range v.tools {
		if sv, ok := v.byServer[t.Server]; ok {
			sv.tools[t.Name] = t.Definition
		}
	}
	return v
}

// publishDiff publishes a server_state event for each server whose state
// or member changed, and a tools_changed event for each server whose
// tools changed.
func (cm *ClusterMember) publishDiff(prev, next clusterView) {
	names := slices.Sorted(maps.Keys(next.byServer))
	for name := range prev.byServer {
		if _, ok := next.byServer[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for _, name := range names {
		p, hadP := prev.byServer[name]
		n, hasN := next.byServer[name]
		if !hasN {
			n = serverView{state: StatePending}
		}
		if !hadP || p.state != n.state || p.member != n.member {
			var previous State
			if hadP {
				previous = p.state
			}
			cm.bus.publish(EventServerState, name, func(h EventHeader) Event {
				return &ServerStateEvent{EventHeader: h, State: n.state, Previous: previous}
			})
		}
		var d ListDiff
		for tool, def := range n.tools {
			old, ok := p.tools[tool]
			switch {
			case !ok:
				d.Added = append(d.Added, tool)
			case !reflect.DeepEqual(old, def):
				d.Changed = append(d.Changed, tool)
			}
		}
		for tool := range p.tools {
			if _, ok := n.tools[tool]; !ok {
				d.Removed = append(d.Removed, tool)
			}
		}
		if !d.Empty() {
			slices.Sort(d.Added)
			slices.Sort(d.Removed)
			slices.Sort(d.Changed)
			cm.bus.publish(EventToolsChanged, name, func(h EventHeader) Event {
				return &ToolsChangedEvent{EventHeader: h, Diff: &d, Tools: len(next.tools)}
			})
		}
	}
}

package cluster

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// viewTimeout bounds one re-read of the cluster-wide pool.
const viewTimeout = 2 * time.Second

// view is the cluster-wide pool as a member last read it.
type view struct {
	tools  []mcpvisor.Tool         // sorted by name
	status []mcpvisor.ServerStatus // sorted by name
	// byServer holds each server's state, member and tools (pool name →
	// definition), for the diffs.
	byServer map[string]serverView
}

type serverView struct {
	state  mcpvisor.State
	member string
	tools  map[string]protocol.Tool
}

// signal asks the refresher to re-read the pool (coalesced).
func (m *Member) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// minRefreshGap is the least pause between two re-reads of the pool.
const minRefreshGap = 100 * time.Millisecond

// refresher re-reads the pool on each signal and every Refresh, until
// ctx ends. It is the view's one writer. After each re-read it pauses as
// long as the re-read took (at least minRefreshGap), so that while
// changes stream in (thousands of servers placed at once) re-reading a
// large pool takes at most about half of one core; the signals of the
// pause are coalesced into one re-read.
func (m *Member) refresher(ctx context.Context) {
	defer close(m.done)
	t := time.NewTicker(m.opts.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		case <-t.C:
		}
		start := time.Now()
		m.refresh(ctx)
		pause := time.NewTimer(max(time.Since(start), minRefreshGap))
		select {
		case <-ctx.Done():
			pause.Stop()
			return
		case <-pause.C:
		}
	}
}

// refresh reads the cluster-wide pool, replaces the view and publishes
// what changed. Members that did not answer keep their servers out of
// the view until they answer again (a dead member's servers come back
// with their new owner). (CallTool calls it too, for a name it does not
// know: two refreshes may then run at once, and the later replaces the
// view.)
func (m *Member) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, viewTimeout)
	defer cancel()
	ov, err := m.e.overview(ctx)
	if err != nil {
		return
	}
	next := viewOf(ov)
	m.viewMu.Lock()
	prev := m.view
	m.view = next
	for _, t := range next.tools {
		m.known[t.Name] = toolTarget{server: t.Server, tool: t.Definition.Name}
	}
	close(m.viewChanged)
	m.viewChanged = make(chan struct{})
	m.viewMu.Unlock()
	m.publishDiff(prev, next)
}

// viewOf makes a view of an Overview.
func viewOf(ov Overview) view {
	v := view{byServer: map[string]serverView{}, tools: ov.Tools}
	seen := map[string]bool{}
	for _, st := range ov.Servers {
		if seen[st.Name] {
			continue // two members in the middle of a hand-over: the first wins
		}
		seen[st.Name] = true
		v.status = append(v.status, st)
		v.byServer[st.Name] = serverView{state: st.State, member: st.Member, tools: map[string]protocol.Tool{}}
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
func (m *Member) publishDiff(prev, next view) {
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
			n = serverView{state: mcpvisor.StatePending}
		}
		if !hadP || p.state != n.state || p.member != n.member {
			var previous mcpvisor.State
			if hadP {
				previous = p.state
			}
			m.bus.publish(mcpvisor.EventServerState, name, func(h mcpvisor.EventHeader) mcpvisor.Event {
				return &mcpvisor.ServerStateEvent{EventHeader: h, State: n.state, Previous: previous}
			})
		}
		var d mcpvisor.ListDiff
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
			m.bus.publish(mcpvisor.EventToolsChanged, name, func(h mcpvisor.EventHeader) mcpvisor.Event {
				return &mcpvisor.ToolsChangedEvent{EventHeader: h, Diff: &d, Tools: len(next.tools)}
			})
		}
	}
}

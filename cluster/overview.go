package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/cluster/internal/wire"
)

// overviewActorName names each member's overview actor: every member
// answers Overview at actor.NewPID(<its address>, overviewActorName).
const overviewActorName = "mcpvisor-overview"

// overviewTimeout bounds one member's answer to Overview when ctx has no
// deadline.
const overviewTimeout = 2 * time.Second

// Overview is the cluster-wide pool as every member that answered
// reported it (Member.Overview).
type Overview struct {
	// Servers are the servers of every member that answered, sorted by
	// name, each with Member set to the id of the member that runs it.
	// During a hand-over a name may be listed by two members.
	Servers []mcpvisor.ServerStatus
	// Tools are those servers' tools, sorted by name.
	Tools []mcpvisor.Tool
	// Unreachable lists the members (addresses) that did not answer in
	// time, with why; their servers are missing from Servers and Tools.
	Unreachable map[string]string
}

// overviewActor answers overview from the local Supervisor's snapshots (no
// I/O, no waiting: it reads published views).
type overviewActor struct{ m *engine }

func (a *overviewActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *wire.OverviewRequest:
		ctx.Respond(a.m.snapshot())
	case *wire.OverviewReply:
		// Another member pushed its snapshot: its pool changed.
		a.m.poolWatch.changed(msg.GetMember())
	}
}

// snapshot is this member's status and MCP tools as an OverviewReply.
func (m *engine) snapshot() *wire.OverviewReply {
	statuses, pool := m.local.StatusAndTools() // one pool: counts and tools agree
	status, _ := json.Marshal(statuses)
	var tools []mcpvisor.Tool
	for _, t := range pool {
		if !t.Builtin {
			tools = append(tools, t)
		}
	}
	toolsJSON, _ := json.Marshal(tools)
	return &wire.OverviewReply{Member: m.id, Address: m.sys.Address(), Status: status, Tools: toolsJSON}
}

// overview asks every member of the current topology what it runs, in
// parallel, each bounded by ctx's deadline (2 s when it has none), and
// returns the cluster-wide status and tool pool (Member.Overview).
func (m *engine) overview(ctx context.Context) (Overview, error) {
	if m.left.Load() {
		return Overview{}, ErrLeft
	}
	t := m.reconcile.latest()
	if t == nil {
		return Overview{}, fmt.Errorf("%w: no topology yet", ErrNoOwner)
	}
	timeout := overviewTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	out := Overview{Unreachable: map[string]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, member := range t.Members {
		addr := member.Address()
		wg.Add(1)
		go func() {
			defer wg.Done()
			reply, err := m.sys.Root.RequestFuture(actor.NewPID(addr, overviewActorName), &wire.OverviewRequest{}, timeout).Result()
			mu.Lock()
			defer mu.Unlock()
			r, ok := reply.(*wire.OverviewReply)
			if err != nil || !ok {
				out.Unreachable[addr] = fmt.Sprintf("no answer: %v", err)
				return
			}
			var status []mcpvisor.ServerStatus
			var tools []mcpvisor.Tool
			if err := json.Unmarshal(r.GetStatus(), &status); err != nil {
				out.Unreachable[addr] = fmt.Sprintf("bad status: %v", err)
				return
			}
			if err := json.Unmarshal(r.GetTools(), &tools); err != nil {
				out.Unreachable[addr] = fmt.Sprintf("bad tools: %v", err)
				return
			}
			for _, s := range status {
				s.Member = r.GetMember()
				out.Servers = append(out.Servers, s)
			}
			out.Tools = append(out.Tools, tools...)
		}()
	}
	wg.Wait()
	sort.Slice(out.Servers, func(i, j int) bool { return out.Servers[i].Name < out.Servers[j].Name })
	sort.Slice(out.Tools, func(i, j int) bool { return out.Tools[i].Name < out.Tools[j].Name })
	return out, nil
}

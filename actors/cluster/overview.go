package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mcpvisor/mcpvisor/actors"
)

// overviewActorName names each member's overview actor: every member
// answers Overview at actor.NewPID(<its address>, overviewActorName).
const overviewActorName = "mcpvisor-overview"

// overviewTimeout bounds one member's answer to Overview when ctx has no
// deadline.
const overviewTimeout = 2 * time.Second

// ServerStatus is a server's status and the member that runs it.
type ServerStatus struct {
	actors.ServerStatus
	// Member is the id of the member that runs the server.
	Member string `json:"member"`
}

// Tool is a tool of the cluster's pool and the member that runs its
// server.
type Tool struct {
	actors.Tool
	// Member is the id of the member that runs the tool's server.
	Member string
}

// Overview is the cluster-wide view: every server and tool, from every
// member that answered.
type Overview struct {
	Servers []ServerStatus // sorted by name
	Tools   []Tool         // sorted by name
	// Unreachable lists the members (addresses) that did not answer in
	// time, with why; their servers are missing from Servers and Tools.
	Unreachable map[string]string
}

// overviewActor answers Overview from the local System's snapshots (no
// I/O, no waiting: it reads published views).
type overviewActor struct{ m *Member }

func (a *overviewActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *OverviewRequest:
		ctx.Respond(a.m.snapshot())
	case *OverviewReply:
		// Another member pushed its snapshot: its pool changed.
		a.m.poolChanged(msg.GetMember())
	}
}

// snapshot is this member's status and MCP tools as an OverviewReply.
func (m *Member) snapshot() *OverviewReply {
	statuses, pool := m.local.StatusAndTools() // one pool: counts and tools agree
	status, _ := json.Marshal(statuses)
	var tools []actors.Tool
	for _, t := range pool {
		if !t.Builtin {
			tools = append(tools, t)
		}
	}
	toolsJSON, _ := json.Marshal(tools)
	return &OverviewReply{Member: m.id, Address: m.sys.Address(), Status: status, Tools: toolsJSON}
}

// Overview asks every member of the current topology what it runs, in
// parallel, each bounded by ctx's deadline (2 s when it has none), and
// returns the cluster-wide status and tool pool: each entry names the
// member that runs it.
func (m *Member) Overview(ctx context.Context) (Overview, error) {
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
			reply, err := m.sys.Root.RequestFuture(actor.NewPID(addr, overviewActorName), &OverviewRequest{}, timeout).Result()
			mu.Lock()
			defer mu.Unlock()
			r, ok := reply.(*OverviewReply)
			if err != nil || !ok {
				out.Unreachable[addr] = fmt.Sprintf("no answer: %v", err)
				return
			}
			var status []actors.ServerStatus
			var tools []actors.Tool
			if err := json.Unmarshal(r.GetStatus(), &status); err != nil {
				out.Unreachable[addr] = fmt.Sprintf("bad status: %v", err)
				return
			}
			if err := json.Unmarshal(r.GetTools(), &tools); err != nil {
				out.Unreachable[addr] = fmt.Sprintf("bad tools: %v", err)
				return
			}
			for _, s := range status {
				out.Servers = append(out.Servers, ServerStatus{ServerStatus: s, Member: r.GetMember()})
			}
			for _, tool := range tools {
				out.Tools = append(out.Tools, Tool{Tool: tool, Member: r.GetMember()})
			}
		}()
	}
	wg.Wait()
	sort.Slice(out.Servers, func(i, j int) bool { return out.Servers[i].Name < out.Servers[j].Name })
	sort.Slice(out.Tools, func(i, j int) bool { return out.Tools[i].Name < out.Tools[j].Name })
	return out, nil
}

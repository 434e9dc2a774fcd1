package management

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/mcpvisor/mcpvisor"
)

// connect_mcp, the tool of a host that connects servers on demand: the
// model names a server of the configuration (never a command or a URL:
// the tool cannot add a server) and asks to connect it, so that its tools
// join the pool, or to disconnect it, so that they leave. Connecting
// offers a server toggled off again (Toggle) and connects one that is
// not ready (a lazy server not yet used, a parked one) through the
// connect scheduler, then waits, up to the call's deadline, for it to be
// ready with its tools in the pool. Disconnecting toggles the server off:
// its tools leave the pool at once and its connection is kept, so that
// connecting it again is instant.

// poolRecheck is how often connect_mcp looks at the pool again while a
// ready server's lists are being folded into it.
const poolRecheck = 20 * time.Millisecond

// connectArgs is connect_mcp's input.
type connectArgs struct {
	Server string `json:"server"`
	Action string `json:"action"`
}

// connectOutput is connect_mcp's output: the server's state and the
// qualified names of its tools in the pool.
type connectOutput struct {
	Server    string         `json:"server"`
	Connected bool           `json:"connected"`
	State     mcpvisor.State `json:"state"`
	Tools     []string       `json:"tools"`
	Error     string         `json:"error,omitempty"`
}

func connectTool(ctx context.Context, s *mcpvisor.Supervisor, args json.RawMessage) (any, error) {
	var a connectArgs
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	if err := required("server", a.Server); err != nil {
		return nil, err
	}
	st, ok := serverStatus(s, a.Server)
	if !ok {
		var names []string
		for _, st := range s.Status() {
			names = append(names, st.Name)
		}
		return nil, fmt.Errorf("%w: %q (configured: %v)", mcpvisor.ErrUnknownServer, a.Server, names)
	}
	switch a.Action {
	case "", "connect":
	case "disconnect":
		if err := s.Server(a.Server).Toggle(ctx, false); err != nil {
			return nil, err
		}
		st, _ = serverStatus(s, a.Server)
		return connectOutput{Server: a.Server, State: st.State, Tools: []string{}}, nil
	default:
		return nil, fmt.Errorf(`argument "action" must be "connect" or "disconnect", not %q`, a.Action)
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := s.Subscribe(wctx) // before acting, so that no change is missed
	asked := time.Now()
	if st.ToggledOff {
		if err := s.Server(a.Server).Toggle(ctx, true); err != nil {
			return nil, err
		}
	}
	if st.State != mcpvisor.StateReady {
		if err := s.Server(a.Server).Reconnect(ctx); err != nil {
			return nil, err
		}
	}
	poolRetry := time.NewTicker(poolRecheck)
	defer poolRetry.Stop()
	for {
		st, _ = serverStatus(s, a.Server)
		tools := poolNamesOf(s, a.Server)
		switch {
		case st.State == mcpvisor.StateReady && s.Server(a.Server).PoolReflects():
			return connectOutput{Server: a.Server, Connected: true, State: st.State, Tools: tools}, nil
		case st.State.Parked() && st.StateSince.After(asked), st.State == mcpvisor.StateDisabled:
			return connectOutput{Server: a.Server, State: st.State, Tools: tools, Error: st.LastError}, nil
		}
		select {
		case _, open := <-events:
			if !open {
				return nil, mcpvisor.ErrClosed
			}
		case <-poolRetry.C:
			// The pool's fold of a ready server publishes no event when
			// it changes nothing (a lazy server's cached tools).
		case <-ctx.Done():
			return nil, fmt.Errorf("%q is %s, not ready yet: %w", a.Server, st.State, context.Cause(ctx))
		}
	}
}

// serverStatus returns the status of the server called name.
func serverStatus(s *mcpvisor.Supervisor, name string) (mcpvisor.ServerStatus, bool) {
	for _, st := range s.Status() {
		if st.Name == name {
			return st, true
		}
	}
	return mcpvisor.ServerStatus{}, false
}

// poolNamesOf returns the qualified names of server's tools in the pool,
// sorted.
func poolNamesOf(s *mcpvisor.Supervisor, server string) []string {
	out := []string{}
	for _, t := range s.Tools() {
		if t.Server == server {
			out = append(out, t.Name)
		}
	}
	slices.Sort(out)
	return out
}

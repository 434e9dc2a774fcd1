package mcpvisor

import "fmt"

// Tools returns the tool pool: the host's built-ins (Options.Builtins)
// sorted by name, then the tools of every ready server, named
// mcp__<server>__<tool>, sorted by name. The slice is the caller's.
func (s *Supervisor) Tools() []Tool { return toolsIn(s.pool.Load()) }

// toolsIn lists pool p's tools, built-ins first.
func toolsIn(p *pool) []Tool {
	out := append(make([]Tool, 0, len(p.builtins)+len(p.tools)), p.builtins...)
	for _, t := range p.tools {
		out = append(out, *t)
	}
	return out
}

// offered checks that a named server's lists are in pool p: configured,
// not toggled off, and ready (or recovering).
func (s *published) offered(p *pool, server string) error {
	h, err := s.handle(server)
	if err != nil {
		return err
	}
	if p.off.Has(server) {
		return fmt.Errorf("%w: %q", ErrServerOff, server)
	}
	if v := h.view.Load(); !v.offersTools() {
		return &NotReadyError{Server: server, State: v.state, Cause: v.err}
	}
	return nil
}

// Status returns every configured server's status, sorted by name.
func (s *Supervisor) Status() []ServerStatus { return s.statusesIn(s.pool.Load()) }

// StatusAndTools returns Status and Tools read from one published pool,
// so that each server's OfferedTools and Tools agree with the pool
// returned (two separate calls may straddle a pool update).
func (s *Supervisor) StatusAndTools() ([]ServerStatus, []Tool) {
	p := s.pool.Load()
	return s.statusesIn(p), toolsIn(p)
}

// statusesIn is every configured server's status with what pool p
// records of it.
func (s *published) statusesIn(p *pool) []ServerStatus {
	hs := *s.handles.Load()
	byServer := make(map[string][]ToolInfo, len(hs))
	for _, t := range p.tools {
		if !t.Builtin {
			byServer[t.Server] = append(byServer[t.Server], toolInfo(*t))
		}
	}
	out := make([]ServerStatus, 0, len(hs))
	for _, h := range hs {
		out = append(out, statusIn(h, h.view.Load(), p, byServer[h.name]))
	}
	return out
}

// pooledStatus returns the status of server, with its tools in the pool,
// and whether that pool reflects the state the status shows: the tools,
// prompts and resources offered for it are those of that state. pooled
// is false for a moment after the server's readiness or lists change
// (the registry folds changes into the pool in batches, at most every
// 100 ms during a connect wave). Both are read from one published pool
// and one view of the server; an unknown server is ErrUnknownServer.
func (s *published) pooledStatus(server string) (st ServerStatus, pooled bool, err error) {
	h, err := s.handle(server)
	if err != nil {
		return ServerStatus{}, false, err
	}
	p, v := s.pool.Load(), h.view.Load()
	var tools []ToolInfo
	for _, t := range p.tools {
		if t.Server == server && !t.Builtin {
			tools = append(tools, toolInfo(*t))
		}
	}
	return statusIn(h, v, p, tools), reflects(p, h, v), nil
}

// statusIn is h's status in view v with what pool p records of it: tools
// are its tools in p.
func statusIn(h *serverHandle, v *serverView, p *pool, tools []ToolInfo) ServerStatus {
	st := v.status()
	if tools == nil {
		tools = []ToolInfo{}
	}
	st.Tools = tools
	st.ToggledOff = p.off.Has(h.name)
	st.Status = StatusOf(st.State, st.ToggledOff)
	st.OfferedTools, _ = p.offered.Get(h.name)
	if st.State == StateReady {
		st.Strikes = int(h.strikes.Load())
	}
	st.Latency = h.latency.stats()
	return st
}

// reflects reports whether pool p reflects view v of h.
func reflects(p *pool, h *serverHandle, v *serverView) bool {
	pooled := p.viewOf(h).view
	return !poolChanged(pooled, v) && !hiddenChanged(pooled, v)
}

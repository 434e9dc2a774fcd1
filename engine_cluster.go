package mcpvisor

import "context"

// The methods of this file are what package cluster asks of the
// member-local Supervisor that runs the servers placed on a member,
// beyond the host API (CallTool, Subscribe, Close).

// PatchServers adds or replaces the servers in set and shuts down those
// named in drop, leaving every other server alone: SetServers for a few
// servers at a time, without a read-modify-write race between callers.
// A name in drop that is not configured is an ErrUnknownServer in
// SetResult.Errors. It returns once the change is applied; connects go
// on in the background.
func (s *Supervisor) PatchServers(ctx context.Context, set map[string]ServerConfig, drop []string) (SetResult, error) {
	res, err := s.sys.PatchServers(ctx, plainServers(set), drop)
	return setResultOf(res), err
}

// ServerState returns the state of the configured server name, read from
// what its actor published (no mailbox hop); an unknown name is an
// ErrUnknownServer.
func (s *Supervisor) ServerState(name string) (State, error) {
	st, err := s.sys.ServerState(name)
	return State(st), hostErr(err)
}

// StatusAndTools returns Status and Tools read from one published pool,
// so that each server's status lists exactly its tools in the pool (two
// separate calls may straddle a pool update).
func (s *Supervisor) StatusAndTools() ([]ServerStatus, []Tool) {
	sts, pool := s.sys.StatusAndTools()
	return statuses(sts, pool), toolsOf(pool)
}

// ToolName returns the pool name (Tool.Name) of the tool that server
// lists as tool: the name a collision gave it, else QualifiedName. ok is
// false when that name routes to a built-in or to another server's tool.
func (s *Supervisor) ToolName(server, tool string) (name string, ok bool) {
	return s.sys.ToolName(server, tool)
}

// ResolveSubscribeOptions applies Subscribe's options and returns what
// they ask for, for an event stream kept outside a Supervisor (a cluster
// member's): resume and after (FromSequence: replay the remembered
// events after sequence number after), and buffer (BufferSize; 0: the
// stream's default).
func ResolveSubscribeOptions(opts ...SubscribeOption) (after uint64, resume bool, buffer int) {
	var o subscribeOptions
	for _, f := range opts {
		f(&o)
	}
	return o.after, o.resume, o.buffer
}

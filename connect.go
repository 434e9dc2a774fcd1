package mcpvisor

import (
	"context"
	"fmt"
)

// Connect adds the server name with config cfg, or replaces its config
// (reconnecting it when the change reaches the connection), leaving every
// other server alone, and waits until it has settled: ready,
// reconnecting after a failed attempt, failed, needs-auth, disabled or
// held for approval (a lazy server waits for its first use and is
// returned pending at once). A server whose config is
// unchanged but that is failed or needs auth is reconnected. The status
// is returned when the server settled; an error means the config was
// refused (the validation error SetServers reports in Errors), the supervisor is closed, or ctx ended first (then the
// server goes on connecting).
func (s *Supervisor) Connect(ctx context.Context, name string, cfg ServerConfig) (ServerStatus, error) {
	if name == "" {
		return ServerStatus{}, fmt.Errorf("%w: empty name", ErrUnknownServer)
	}
	seq, err := s.sys.LastSeq(ctx)
	if err != nil {
		return ServerStatus{}, err
	}
	res, err := s.sys.PatchServers(ctx, plainServers(map[string]ServerConfig{name: cfg}), nil)
	if err != nil {
		return ServerStatus{}, err
	}
	if err := res.Errors[name]; err != nil {
		return ServerStatus{}, fmt.Errorf("mcpvisor: server %q: %w", name, err)
	}
	// A server whose connection is being replaced shows its old state
	// until its actor has moved on: wait for its next state event.
	moving := len(res.Reconnected) == 1
	if len(res.Unchanged) == 1 {
		if st, err := s.ServerStatus(name); err == nil && st.State.Parked() {
			if err := s.sys.Reconnect(ctx, name); err != nil {
				return ServerStatus{}, err
			}
			moving = true
		}
	}
	return s.awaitServer(ctx, name, seq, moving)
}

// awaitServer waits until server name has settled, reading the events
// after sequence number seq, and returns its status. With moving set, a
// state the server had before seq does not count: it waits for the
// server's first state event after seq (or a gap, which may have hidden
// it) first.
func (s *Supervisor) awaitServer(ctx context.Context, name string, seq uint64, moving bool) (ServerStatus, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := s.Subscribe(ctx, FromSequence(seq))
	for {
		st, err := s.ServerStatus(name)
		if err != nil {
			return st, err
		}
		if !moving && settledForHost(st) {
			return st, nil
		}
		select {
		case ev, ok := <-events:
			if !ok {
				if err := ctx.Err(); err != nil {
					return st, err
				}
				return st, ErrClosed
			}
			if h := ev.Header(); (h.Type == EventServerState && h.Server == name) || h.Type == EventGap {
				moving = false
			}
		case <-ctx.Done():
			return st, ctx.Err()
		}
	}
}

// settledForHost reports whether Connect may return: the server has
// settled (State.Settled: a server waiting for its backoff delay has),
// or it is lazy and waits for its first use.
func settledForHost(st ServerStatus) bool {
	return st.State.Settled() || (st.Lazy && st.State == StatePending)
}

// Disconnect shuts the server name down (the full ladder) and removes it
// from the configured set, leaving every other server alone; its tools
// have left the pool when Disconnect returns. A name not configured is
// ErrUnknownServer.
func (s *Supervisor) Disconnect(ctx context.Context, name string) error {
	res, err := s.sys.PatchServers(ctx, nil, []string{name})
	if err != nil {
		return err
	}
	return res.Errors[name]
}

// ServerStatus returns the status of the server name, or
// ErrUnknownServer.
func (s *Supervisor) ServerStatus(name string) (ServerStatus, error) {
	for _, st := range s.Status() {
		if st.Name == name {
			return st, nil
		}
	}
	return ServerStatus{}, fmt.Errorf("%w: %q", ErrUnknownServer, name)
}

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
	moving := waitNone
	if len(res.Reconnected) == 1 {
		moving = waitRestart
	}
	if len(res.Unchanged) == 1 {
		if st, err := s.ServerStatus(name); err == nil && st.State.Parked() {
			if err := s.sys.Reconnect(ctx, name); err != nil {
				return ServerStatus{}, err
			}
			moving = waitAnyState
		}
	}
	return s.awaitServer(ctx, name, seq, moving)
}

// awaitMove says which state event shows that a server has moved on from
// the state it had when a Connect began.
type awaitMove int

const (
	// waitNone: its current state counts.
	waitNone awaitMove = iota
	// waitAnyState: its next state event (a parked server sent to
	// reconnect sends nothing else meanwhile).
	waitAnyState
	// waitRestart: the state its actor starts over in after a config
	// change (pending, needs-approval or disabled). Events of the old
	// config published meanwhile (a server in backoff connecting again)
	// do not count.
	waitRestart
)

// moved reports whether ev is the state event that ends wait w.
func (w awaitMove) moved(ev *ServerStateEvent) bool {
	switch w {
	case waitAnyState:
		return true
	case waitRestart:
		return ev.State == StatePending || ev.State == StateNeedsApproval || ev.State == StateDisabled
	}
	return true
}

// awaitServer waits until server name has settled, reading the events
// after sequence number seq, and returns its status. Unless moving is
// waitNone, a state the server had before seq does not count: it waits
// for the state event that moving names (or a gap, which may have hidden
// it) first.
func (s *Supervisor) awaitServer(ctx context.Context, name string, seq uint64, moving awaitMove) (ServerStatus, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := s.Subscribe(ctx, FromSequence(seq))
	for {
		st, err := s.ServerStatus(name)
		if err != nil {
			return st, err
		}
		if moving == waitNone && settledForHost(st) {
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
			switch e := ev.(type) {
			case *ServerStateEvent:
				if e.Server == name && moving.moved(e) {
					moving = waitNone
				}
			case *GapEvent:
				moving = waitNone // the event may be in the gap
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

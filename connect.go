package mcpvisor

import (
	"context"
	"fmt"
	"reflect"
	"time"
)

// Connect adds the server name with config cfg, or replaces its config
// (reconnecting it when the change reaches the connection), leaving every
// other server alone, and waits until it has settled: ready,
// reconnecting after a failed attempt, failed, needs-auth, disabled or
// held for approval (a lazy server waits for its first use and is
// returned pending at once). A server whose config is
// unchanged but that is failed or needs auth is reconnected. The status
// is returned when the server settled, and a ready server's tools are in
// it (the tool pool has taken them in); an error means the config was
// refused (the validation error SetServers reports in Errors), the supervisor is closed, or ctx ended first (then the
// server goes on connecting).
func (s *Supervisor) Connect(ctx context.Context, name string, cfg ServerConfig) (ServerStatus, error) {
	if name == "" {
		return ServerStatus{}, fmt.Errorf("%w: empty name", ErrUnknownServer)
	}
	seq, err := s.LastSeq(ctx)
	if err != nil {
		return ServerStatus{}, err
	}
	res, err := s.PatchServers(ctx, map[string]ServerConfig{name: cfg}, nil)
	if err != nil {
		return ServerStatus{}, err
	}
	if err := res.Errors[name]; err != nil {
		return ServerStatus{}, fmt.Errorf("mcpvisor: server %q: %w", name, err)
	}
	// A server whose connection is being replaced shows its old state
	// until its actor has moved on: wait for its next state event.
	w := await{name: name}
	if len(res.Reconnected) == 1 {
		// The status shows the new config once the actor has applied it.
		runs := redact(cfg)
		w.runs = &runs
	}
	if len(res.Unchanged) == 1 {
		if st, err := s.Server(name).Status(); err == nil && st.State.Parked() {
			if err := s.reg.reconnect(ctx, name); err != nil {
				return ServerStatus{}, err
			}
			w.nextState = true
		}
	}
	return w.wait(ctx, s, seq)
}

// await says when Connect may read a server's status as the outcome of
// its own change, and not as a state the server had before.
type await struct {
	name string
	// nextState: only after the server's next state event (a parked
	// server sent to reconnect sends nothing else meanwhile).
	nextState bool
	// runs, for a replaced config: only once the status shows this
	// config (the actor has applied it), and the server is in the state
	// it starts over in or has sent a state event since. Events of the old
	// config published meanwhile (a server in backoff connecting again)
	// do not count.
	runs *StatusConfig
}

// pending reports whether st is still a state from before the change.
func (w *await) pending(st ServerStatus) bool {
	if w.runs != nil && reflect.DeepEqual(st.Config, *w.runs) &&
		(st.State == StatePending || st.State == StateNeedsApproval || st.State == StateDisabled) {
		w.runs = nil
	}
	return w.nextState || w.runs != nil
}

// event notes an event read after the change.
func (w *await) event(ev Event, st ServerStatus) {
	switch e := ev.(type) {
	case *ServerStateEvent:
		if e.Server != w.name {
			return
		}
		w.nextState = false
		if w.runs != nil && reflect.DeepEqual(st.Config, *w.runs) {
			w.runs = nil
		}
	case *GapEvent:
		w.nextState, w.runs = false, nil // what was awaited may be in the gap
	}
}

// wait waits until the server of w has settled in s, reading the events
// after sequence number seq, and returns its status; a state from before
// the change does not count (see await), nor one the tool pool does not
// reflect yet (the status's Tools would lag its State).
func (w await) wait(ctx context.Context, s *Supervisor, seq uint64) (ServerStatus, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := s.Subscribe(ctx, FromSequence(seq))
	// A config applied without a state change (a lazy server pending
	// before and after) publishes no event: look again now and then.
	look := time.NewTicker(20 * time.Millisecond)
	defer look.Stop()
	for {
		st, pooled, err := s.pooledStatus(w.name)
		if err != nil {
			return st, err
		}
		if !w.pending(st) && settledForHost(st) && pooled {
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
			if st, err = s.Server(w.name).Status(); err != nil {
				return st, err
			}
			w.event(ev, st)
		case <-look.C:
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

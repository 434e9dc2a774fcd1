package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/cluster/internal/wire"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// retryGap is the pause before a call tries the server's owner again
// (after a dead letter, a draining member, or a server still connecting).
const retryGap = 100 * time.Millisecond

// ownerWait bounds how long a call whose context has no deadline waits
// for its server to have a reachable owner (a re-homing takes seconds).
// Once an owner runs it, the call has its whole deadline.
const ownerWait = 30 * time.Second

// defaultCallTimeout is mcpvisor.Options.CallTimeout's zero value.
const defaultCallTimeout = 100_000_000 * time.Millisecond

// answerGrace is how long past the call's deadline a caller waits for
// the owner's answer (the owner's deadline passes a moment after the
// caller's: the request's flight).
const answerGrace = 500 * time.Millisecond

// departureGrace is how long a call in flight on a member that left the
// topology waits for its answer before the member is taken for dead. A
// member leaving gracefully answers every call it got ("draining" for
// the late ones) and stays up for two membership polls after it left,
// but under load its answer can come more than a second after the
// departure is seen (a call failed so in CI): the grace is what a
// killed member's calls wait in vain.
const departureGrace = 3 * time.Second

// callTool calls tool of server on whichever member runs the server, and
// returns what single-node mode returns: the result, or the same typed
// errors (mcpvisor.ErrUnknownTool, *mcpvisor.NotReadyError,
// *mcpvisor.ConnectionLostError, …).
//
// The call's deadline is ctx's; without one, the server's timeoutMs, else
// Options.Supervisor.CallTimeout (what the server's supervisor would
// apply on one node). The owner runs the call with what is left of it.
// While the server has no reachable owner (its member died and the
// cluster has not placed it again yet, its member is draining, or its new
// owner is still connecting) the call tries again until that deadline,
// or for at most ownerWait when ctx has none; then it returns a
// *mcpvisor.NotReadyError, unwrapping to ErrNoOwner when no member
// answered. It never waits past the call's deadline.
func (m *engine) callTool(ctx context.Context, server, tool string, args json.RawMessage) (*protocol.CallToolResult, error) {
	if m.left.Load() {
		return nil, ErrLeft
	}
	kind, ok := m.kind(server)
	if !ok {
		return nil, fmt.Errorf("%w: %q", mcpvisor.ErrUnknownServer, server)
	}
	if !m.kindHasMembers(kind) {
		// A pinned server no member's labels match: nothing will place it.
		return nil, &mcpvisor.NotReadyError{Server: server, State: mcpvisor.StatePending,
			Cause: fmt.Errorf("%w: no member has the labels of kind %q", ErrNoOwner, kind)}
	}
	deadline, hasDeadline := ctx.Deadline()
	retryUntil := deadline
	if !hasDeadline {
		now := time.Now()
		deadline = now.Add(m.callTimeout(server))
		retryUntil = now.Add(min(m.callTimeout(server), ownerWait))
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var last error
	for {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			break
		}
		res, err, retry := m.callOnce(ctx, server, kind, tool, args, remaining)
		if !retry {
			return res, err
		}
		last = err
		wait := min(retryGap, time.Until(retryUntil))
		if wait <= 0 {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
			continue
		}
		break
	}
	waited := ctx.Err()
	if waited == nil {
		waited = context.DeadlineExceeded // ownerWait passed
	}
	var notReady *mcpvisor.NotReadyError
	if errors.As(last, &notReady) {
		notReady.Waited = waited
		return nil, notReady
	}
	cause := ErrNoOwner
	if last != nil && !errors.Is(last, ErrNoOwner) {
		cause = fmt.Errorf("%w: %w", ErrNoOwner, last)
	}
	if ctx.Err() == nil {
		return nil, &mcpvisor.NotReadyError{Server: server, State: mcpvisor.StateReconnecting, Cause: cause, Waited: context.DeadlineExceeded}
	}
	return nil, &mcpvisor.NotReadyError{Server: server, State: mcpvisor.StateReconnecting, Cause: cause, Waited: context.Cause(ctx)}
}

// callTimeout is the deadline of a call to server whose context has
// none, as the server's supervisor would set it on one node: the
// server's timeoutMs, else Options.Supervisor.CallTimeout, else
// mcpvisor's default.
func (m *engine) callTimeout(server string) time.Duration {
	if cfg, ok := m.config(server); ok && cfg.TimeoutMs > 0 {
		return time.Duration(cfg.TimeoutMs) * time.Millisecond
	}
	if m.opts.Supervisor.CallTimeout > 0 {
		return m.opts.Supervisor.CallTimeout
	}
	return defaultCallTimeout
}

// callOnce makes one cluster request for the call. retry says the
// outcome is one of the gaps of a re-homing (no owner answered, the
// owner drains, the server is still connecting there).
func (m *engine) callOnce(ctx context.Context, server, kind, tool string, args json.RawMessage, timeout time.Duration) (*protocol.CallToolResult, error, bool) {
	owner := m.lookup.owner(pcluster.NewClusterIdentity(server, kind))
	remote := owner != "" && owner != m.sys.Address()
	if remote && m.departed.isDraining(owner) {
		// The owner leaves (it announced it, or refused a call): it would
		// refuse this call, and a request sent to it now could be lost
		// with its endpoint when it leaves, leaving the caller unable to
		// tell whether the call ran. Send nothing; try again once the
		// topology names the next owner.
		return nil, fmt.Errorf("%w: %w: member %s leaves", ErrNoOwner, ErrDraining, owner), true
	}
	// A call in flight on a member that leaves the topology (killed
	// with -9) ends now, typed: it may have run there, so it is not
	// tried again (single-node mode's lost connection). The watch starts
	// before the request is sent, so that no departure is missed.
	var gone <-chan struct{}
	if remote {
		ch, unwatch := m.departed.watch(owner)
		defer unwatch()
		gone = ch
	}
	msg := &wire.CallTool{Server: server, Tool: tool, Arguments: args, TimeoutMs: timeout.Milliseconds(), Principal: principalOf(ctx)}
	type answer struct {
		resp any
		err  error
	}
	done := make(chan answer, 1)
	// cluster.Request takes no context: it is bounded by its timeout, and
	// the caller stops waiting for it when ctx ends.
	go func() {
		resp, err := m.c.Request(server, kind, msg,
			pcluster.WithTimeout(timeout+answerGrace),
			pcluster.WithRetryCount(3),
			pcluster.WithRetryAction(retryPause),
			pcluster.WithContext(m.sys.Root))
		done <- answer{resp, err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		if ctx.Err() != context.DeadlineExceeded {
			return nil, ctx.Err(), true
		}
		// The owner runs the call with the same deadline and answers
		// "deadline" about when it passes here: wait a moment for that
		// answer, so that a call that ran out of time says so.
		grace := time.NewTimer(answerGrace)
		defer grace.Stop()
		select {
		case a = <-done:
		case <-grace.C:
			return nil, ctx.Err(), true
		}
	case <-gone:
		// A member that leaves gracefully has finished its calls before
		// it leaves the topology and answers late ones "draining" at
		// once (this request was sent before it was known to drain): wait
		// a moment for that answer before taking it for dead.
		grace := time.NewTimer(departureGrace)
		defer grace.Stop()
		select {
		case a = <-done:
		case <-ctx.Done():
			return nil, ctx.Err(), true
		case <-grace.C:
			return nil, &mcpvisor.ConnectionLostError{Server: server, Err: ErrMemberLost}, false
		}
	}
	if a.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoOwner, a.err), true
	}
	r, ok := a.resp.(*wire.CallResult)
	if !ok {
		return nil, fmt.Errorf("%w: unexpected answer %T", ErrNoOwner, a.resp), true
	}
	if err := errorOf(server, r); err != nil {
		if r.GetKind() == wire.ErrorKind_ERROR_KIND_DRAINING {
			// Draining is for good: send it no call any more.
			m.departed.drains(m.addressOf(r.GetMember()))
		}
		return nil, err, retryable(r)
	}
	var res protocol.CallToolResult
	if err := json.Unmarshal(r.GetResult(), &res); err != nil {
		return nil, fmt.Errorf("mcpvisor cluster: server %q: decoding the result from member %s: %w", server, r.GetMember(), err), false
	}
	return &res, nil, false
}

// addressOf returns the address of the member with id in the latest
// topology, or "".
func (m *engine) addressOf(id string) string {
	if t := m.reconcile.latest(); t != nil {
		for _, member := range t.Members {
			if gossipID(member.Id) == id {
				return member.Address()
			}
		}
	}
	return ""
}

// kindHasMembers says whether a member of the latest topology runs
// grains of kind (true before the first topology: the call's retries
// decide then).
func (m *engine) kindHasMembers(kind string) bool {
	t := m.reconcile.latest()
	if t == nil {
		return true
	}
	for _, member := range t.Members {
		if member.HasKind(kind) {
			return true
		}
	}
	return false
}

// retryable says whether a refusal is a gap of re-homing: the member
// drains, or the server is just being placed or connected there.
func retryable(r *wire.CallResult) bool {
	switch r.GetKind() {
	case wire.ErrorKind_ERROR_KIND_DRAINING, wire.ErrorKind_ERROR_KIND_CLOSED:
		return true
	case wire.ErrorKind_ERROR_KIND_NOT_READY:
		switch mcpvisor.State(r.GetState()) {
		case mcpvisor.StatePending, mcpvisor.StateConnecting, mcpvisor.StateReady:
			return true // placed a moment ago (ready: its pool is folding in)
		}
	}
	return false
}

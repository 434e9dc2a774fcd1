package mcpvisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/cenkalti/backoff/v4"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Reconnecting (see ReconnectPolicy). Every failure goes through
// afterFailure, which decides with ClassifyFailure: auth failures park the
// server in needs-auth, config and protocol failures in failed; anything
// else (the connection ended, a transient transport error) starts or
// continues an episode of reconnect attempts, bounded by the policy's
// budget. Attempts go through the registry's connect scheduler like any
// connect (the server goes back to pending), so a storm of reconnects is
// admitted a few at a time.

// retryNow is sent by a reconnect timer when its delay is over.
type retryNow struct{ gen uint64 }

// stableNow is sent when connection gen has stayed up for the policy's
// StableAfter.
type stableNow struct{ gen uint64 }

// strikeOut is sent (by a caller or the pinger) when connection gen has
// had ReconnectPolicy.Strikes transient errors in a row; err is the last.
type strikeOut struct {
	gen uint64
	err error
}

// resetEpisode is sent by the registry before a Reconnect's connect: the
// server gets a full reconnect budget again.
type resetEpisode struct{}

// reconnectEpisode has one job: the server's failure policy. It decides
// what a failure leads to (parked, or one more attempt after a backoff
// delay, within the policy's budget), arms and disarms the reconnect and
// stable timers, pings the live connection, and drops a connection that
// struck out. An episode starts at the first failure and ends once a new
// connection has stayed up for StableAfter, or at a config change or a
// Reconnect.
//
// Concurrency: owned by the server actor's goroutine, like the actor it
// is part of (a); its timers and pinger are goroutines that only send
// messages.
type reconnectEpisode struct {
	a *serverActor // the actor whose failures it handles

	backoff     *backoff.ExponentialBackOff // delays of the current episode; nil outside one
	attempt     int                         // connect attempts in the current episode; 0 outside one
	nextRetry   time.Time                   // when the scheduled attempt starts; zero if none
	cancelRetry context.CancelFunc          // non-nil while a reconnect is scheduled
	// fullEpisode is set by resetEpisode (Reconnect) so that the next
	// connect of a parked server starts a full episode, not one wake-up
	// attempt.
	fullEpisode bool
}

// afterFailure handles a failed connect attempt, or (lost set) the end of
// a live connection.
func (r *reconnectEpisode) afterFailure(err error, lost bool) {
	a := r.a
	if a.stopping || !a.cfg.startable() {
		return
	}
	kind := ClassifyFailure(err)
	switch kind {
	case FailureAuth:
		r.park(StateNeedsAuth, err)
		if a.parent != nil {
			a.root.Send(a.parent, serverEvent{handle: a.h, event: needsAuthEvent(a.h, err)})
		}
		return
	case FailureConfig, FailureProtocol, FailureSandbox:
		r.park(StateFailed, err)
		return
	}
	if r.attempt >= max(a.policy.MaxAttempts, 0) {
		if r.attempt > 0 {
			err = fmt.Errorf("gave up after %d reconnect attempts: %w", r.attempt, err)
		}
		r.park(StateFailed, err)
		return
	}
	if r.backoff == nil {
		r.backoff = a.policy.newBackoff()
	}
	r.attempt++
	if lost && r.attempt == 1 && kind == FailureClosed {
		// The connection simply ended (the process exited, the server
		// closed it): the first attempt goes at once.
		a.log.Info().Msg("connection ended; reconnecting")
		a.setState(StatePending, err)
		return
	}
	delay := r.backoff.NextBackOff()
	r.nextRetry = time.Now().Add(delay)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancelRetry = cancel
	gen, self, root := a.gen, a.self, a.root
	a.log.Info().Dur("in", delay).Int("attempt", r.attempt).Int("of", a.policy.MaxAttempts).
		Str("failure", string(kind)).Msg("reconnect scheduled")
	a.setState(StateReconnecting, err)
	a.goroutines.start("server.retry-timer", func() {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
			root.Send(self, retryNow{gen: gen})
		case <-ctx.Done():
		}
	})
}

// park stops trying: the server makes no request until woken (a call,
// Reconnect, a config change). Its last lists are kept, out of the pool,
// so that a call by a tool's qualified name can still wake it.
func (r *reconnectEpisode) park(state State, err error) {
	a := r.a
	a.recovering = false
	r.nextRetry = time.Time{}
	a.setState(state, err) // logs the warning that says why, with err
}

// retry handles a reconnect timer: the server goes back to pending, and
// the registry admits it again.
func (r *reconnectEpisode) retry(m retryNow) {
	a := r.a
	if m.gen != a.gen || a.state != StateReconnecting || a.stopping {
		return
	}
	r.cancelRetry = nil
	r.nextRetry = time.Time{}
	a.setState(StatePending, a.err)
}

// cancel disarms a scheduled reconnect.
func (r *reconnectEpisode) cancel() {
	if r.cancelRetry != nil {
		r.cancelRetry()
		r.cancelRetry = nil
	}
	r.nextRetry = time.Time{}
}

// end forgets past failures: after a stable connection, a config
// change or a Reconnect.
func (r *reconnectEpisode) end() {
	a := r.a
	r.attempt = 0
	r.backoff = nil
	a.h.strikes.Store(0)
}

// reset gives the server a full reconnect budget again (a Reconnect):
// the episode ends, and the next connect of a parked server starts a
// full one rather than one wake-up attempt.
func (r *reconnectEpisode) reset() {
	r.end()
	r.fullEpisode = true
}

// startStableTimer ends the episode once the new connection has stayed up
// for the policy's StableAfter.
func (r *reconnectEpisode) startStableTimer() {
	a := r.a
	if r.attempt == 0 && r.backoff == nil {
		return // no episode to end
	}
	sess, gen, self, root, after := a.sess, a.gen, a.self, a.root, time.Duration(a.policy.StableAfter)
	a.goroutines.start("server.stable-timer", func() {
		t := time.NewTimer(after)
		defer t.Stop()
		select {
		case <-t.C:
			root.Send(self, stableNow{gen: gen})
		case <-sess.Done():
		}
	})
}

func (r *reconnectEpisode) stable(m stableNow) {
	a := r.a
	if m.gen != a.gen || a.sess == nil {
		return
	}
	a.log.Info().Int("attempts", r.attempt).Msg("connection stable; reconnect history cleared")
	r.end()
	a.publish()
}

// struckOut closes a connection that had too many transient errors in a
// row, failing its pending calls, and reconnects with backoff.
func (r *reconnectEpisode) struckOut(m strikeOut) {
	a := r.a
	if m.gen != a.gen || a.sess == nil {
		return
	}
	a.log.Warn().Err(m.err).Int("strikes", a.policy.Strikes).Msg("too many transient errors in a row; reconnecting")
	sess := a.sess
	a.sess = nil
	cause := fmt.Errorf("%w: %d transient errors in a row, the last: %w", session.ErrServerRestarting, a.policy.Strikes, m.err)
	a.goroutines.closeInBackground(sess, cause)
	a.relister.forgetInFlight()
	a.recovering = true
	r.afterFailure(m.err, false)
}

// pingTimeout bounds one liveness ping, whatever the ping interval: the
// interval says how often to ask, not how fast a healthy server must
// answer. (A ping used to time out after min(interval, pingTimeout): with
// a short interval a healthy server on a loaded machine struck out.)
const pingTimeout = 10 * time.Second

// startPinging pings the ready server at its ping interval, if any. A
// failed ping is a strike like a failed call, except one that timed out
// while calls were in flight; an answer clears the strikes; a server
// without ping (method not found) is left alone.
func (r *reconnectEpisode) startPinging() {
	a := r.a
	interval := time.Duration(a.cfg.PingInterval)
	if interval <= 0 {
		interval = a.opts.PingInterval
	}
	if interval <= 0 {
		return
	}
	sess, h, root, log := a.sess, a.h, a.root, a.log
	gen, limit := a.gen, a.policy.Strikes
	a.goroutines.start("server.ping", func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-sess.Done():
				return
			}
			busy := sess.Liveness().Owed > 0
			ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
			err := sess.Ping(ctx)
			cancel()
			if sess.Err() != nil {
				return
			}
			var rpcErr *protocol.Error
			if errors.As(err, &rpcErr) && rpcErr.Code == protocol.CodeMethodNotFound {
				log.Info().Msg("the server does not answer ping; no liveness pings")
				return
			}
			if err != nil && rpcErr == nil {
				if errors.Is(err, session.ErrTimeout) && (busy || sess.Liveness().Owed > 0) {
					// A server at work on calls may not answer a ping
					// meanwhile (one request at a time): not a strike; its
					// calls' deadlines bound it (see liveness.go).
					continue
				}
				h.strike(root, gen, limit, err)
				continue
			}
			h.strikes.Store(0)
		}
	})
}

// strike counts one transient error of connection gen, and tells the
// actor when it is the limit-th in a row.
func (h *serverHandle) strike(root *actor.RootContext, gen uint64, limit int, err error) {
	if int(h.strikes.Add(1)) == limit {
		root.Send(h.pid, strikeOut{gen: gen, err: err})
	}
}

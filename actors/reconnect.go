package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/mcpvisor/mcpvisor/actors/session"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// Reconnecting. A session that expired (the server forgot it) is replaced
// at once: that is not a failure of the server. A remote server whose
// connect failed, or whose connection was lost, for a reason that may heal
// by itself (refused, reset, timeout, 5xx: transports.Class.Transient) is
// tried again after an exponential backoff, up to maxReconnects times in a
// row; then it stays failed until Reconnect or a config change wakes it.
// Auth, config and other 4xx failures are not retried.

// maxReconnects bounds consecutive automatic reconnects of one server.
const maxReconnects = 5

func newReconnectBackoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 500 * time.Millisecond
	b.Multiplier = 2
	b.RandomizationFactor = 0.3
	b.MaxInterval = 30 * time.Second
	b.MaxElapsedTime = 0 // the attempt count bounds it
	b.Reset()
	return b
}

// retryNow is sent by a reconnect timer when its delay is over.
type retryNow struct{ gen uint64 }

// scheduleReconnect arms a reconnect of a remote server after the next
// backoff delay, unless the budget is spent or the failure cannot heal by
// itself (a config error).
func (a *serverActor) scheduleReconnect(cause error) {
	if a.cfg.IsLocal() || a.stopping || a.cfg.Disabled {
		return
	}
	class := transports.Classify(cause)
	if !class.Transient() || errors.Is(cause, ErrUnsupportedTransport) || errors.Is(cause, session.ErrVersionMismatch) {
		a.log.Warn().Str("class", class.String()).Msg("not reconnecting: the failure needs a config change or a new login")
		return
	}
	if a.reconnects >= maxReconnects {
		a.log.Warn().Int("attempts", a.reconnects).Msg("reconnect budget spent; parked until Reconnect or a config change")
		return
	}
	if a.backoff == nil {
		a.backoff = newReconnectBackoff()
	}
	a.reconnects++
	delay := a.backoff.NextBackOff()
	ctx, cancel := context.WithCancel(context.Background())
	a.cancelRetry = cancel
	gen, self, root := a.gen, a.self, a.root
	a.log.Info().Dur("in", delay).Int("attempt", a.reconnects).Str("class", class.String()).Msg("reconnect scheduled")
	a.goroutine(func() {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
			root.Send(self, retryNow{gen: gen})
		case <-ctx.Done():
		}
	})
}

// retry handles a reconnect timer: the server goes back to pending, and
// the registry admits it again.
func (a *serverActor) retry(m retryNow) {
	if m.gen != a.gen || a.state != StateFailed || a.stopping {
		return
	}
	a.cancelRetry = nil
	a.setState(StatePending, a.err)
}

// cancelReconnect disarms a scheduled reconnect.
func (a *serverActor) cancelReconnect() {
	if a.cancelRetry != nil {
		a.cancelRetry()
		a.cancelRetry = nil
	}
}

// resetReconnects forgets past failures, once a connection is ready or
// the config changed.
func (a *serverActor) resetReconnects() {
	a.reconnects = 0
	if a.backoff != nil {
		a.backoff.Reset()
	}
}

// Listening (2026-07-28). A stateless-era server sends its notifications
// only on a subscriptions/listen stream, which the server actor keeps open
// for the life of the session: reopened after a drop with a backoff of at
// least listenMinWait, so that a host cutting streams on a timer cannot
// cause a reopen loop. After listenMaxFailures drops in a row that were
// never acknowledged the connection counts as lost.
var (
	listenMinWait     = time.Second
	listenMaxWait     = time.Minute
	listenHealthy     = 5 * time.Second // a stream open this long after its ack resets the backoff
	listenMaxFailures = 8
)

// startListening opens the listen stream of a ready stateless-era
// session, selecting the list_changed notifications the server offers.
// Each acknowledgement of the stream re-lists what it covers (see
// notification): changes before the stream opened were not announced.
func (a *serverActor) startListening() {
	sess := a.sess
	if !protocol.UsesDiscover(sess.ProtocolVersion()) {
		return
	}
	caps := sess.Capabilities()
	subs := protocol.NotificationSubscriptions{
		ToolsListChanged:     caps.Tools != nil && caps.Tools.ListChanged,
		PromptsListChanged:   caps.Prompts != nil && caps.Prompts.ListChanged,
		ResourcesListChanged: caps.Resources != nil && caps.Resources.ListChanged,
	}
	if subs.IsEmpty() {
		return
	}
	gen, self, root, log := a.gen, a.self, a.root, a.log
	a.goroutine(func() {
		minWait, maxFailures := listenMinWait, listenMaxFailures
		b := backoff.NewExponentialBackOff()
		b.InitialInterval, b.MaxInterval, b.MaxElapsedTime, b.RandomizationFactor = minWait, listenMaxWait, 0, 0.2
		b.Reset()
		failures := 0
		for {
			opened := time.Now()
			out, err := sess.Listen(context.Background(), subs)
			if sess.Err() != nil {
				return // the session ended; the next one listens anew
			}
			var rpcErr *protocol.Error
			if errors.As(err, &rpcErr) && (rpcErr.Code == protocol.CodeMethodNotFound || rpcErr.Code == protocol.CodeInvalidParams) {
				log.Info().Err(err).Msg("the server does not offer subscriptions/listen; list changes are seen at the next connection")
				return
			}
			if out.Acknowledged && time.Since(opened) >= listenHealthy {
				b.Reset()
				failures = 0
			} else if failures++; failures >= maxFailures {
				// A stateless server has no connection whose end would
				// say it is gone: a listen stream that cannot be kept
				// open is that signal. The connection counts as lost (the
				// actor reconnects with backoff, and the next session
				// listens anew), rather than a session that looks ready
				// and hears nothing.
				log.Warn().Err(err).Int("attempts", failures).Msg("subscriptions/listen keeps failing; treating the connection as lost")
				root.Send(self, connectionLost{gen: gen, err: fmt.Errorf("%w: subscriptions/listen failed %d times in a row: %w", session.ErrConnectionClosed, failures, err)})
				return
			}
			wait := max(b.NextBackOff(), minWait)
			log.Debug().Err(err).Bool("acknowledged", out.Acknowledged).Dur("reopen_in", wait).Msg("listen stream ended")
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-sess.Done():
				t.Stop()
				return
			}
		}
	})
}

package mcpvisor

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// A list the server refuses. A server whose connection is fine but whose
// tools/list (or resources/list, prompts/list) answers a JSON-RPC error
// is not a failed connection: reconnecting would not help and would
// throw away what works. The server stays ready, that list stays empty
// (or, after a list_changed, as it last was), the error is in its status
// (ServerStatus.ListErrors) and in an EventListFailed, and the listing is
// retried on the same connection after a backoff delay (the server's
// ReconnectPolicy delays: InitialDelay growing by Multiplier up to
// MaxDelay, with Jitter), without a budget, for as long as the
// connection lives. The first listing that succeeds clears the error and
// brings the list into the pool (an EventToolsChanged, or
// prompts/resources_changed, says what arrived).

// listRetry is the retry state of one list kind on the live connection.
type listRetry struct {
	err     error                       // the last failure; nil when the list is fine
	backoff *backoff.ExponentialBackOff // delays since the first failure
	at      time.Time                   // when the scheduled retry lists again; zero if none
	cancel  context.CancelFunc          // stops the scheduled retry's timer
	failed  int                         // failures in a row
}

// name is how statuses and events name kind k: tools, resources, prompts.
func (k listKind) name() string {
	switch k {
	case listResources:
		return "resources"
	case listPrompts:
		return "prompts"
	}
	return "tools"
}

// serverRefused reports whether err is the server's own answer (a
// JSON-RPC error), as opposed to a transport failure or a timeout.
func serverRefused(err error) bool {
	var rpcErr *protocol.Error
	return errors.As(err, &rpcErr)
}

// listsFailed records the lists a new connection could not get (errs by
// kind, nil for those it got) and schedules their retries. It reports
// whether there was any (the view must then be published).
func (a *serverActor) listsFailed(errs [numListKinds]error) bool {
	failed := false
	for k, err := range errs {
		if err != nil {
			a.listFailed(listKind(k), err)
			failed = true
		}
	}
	return failed
}

// listFailed records that listing kind failed with err, tells
// subscribers, and schedules the next attempt (unless one is scheduled).
// The caller publishes the view.
func (a *serverActor) listFailed(kind listKind, err error) {
	r := &a.listRetries[kind]
	r.err = err
	r.failed++
	if r.backoff == nil {
		r.backoff = a.policy.newBackoff()
	}
	if a.parent != nil {
		a.root.Send(a.parent, serverEvent{handle: a.h, event: eventRecord{Type: EventListFailed, List: kind.name(), Err: err.Error()}})
	}
	if r.cancel != nil {
		return // a retry is already on its way
	}
	delay := r.backoff.NextBackOff()
	r.at = time.Now().Add(delay)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	a.log.Warn().Err(err).Str("list", kind.name()).Int("failures", r.failed).Dur("retryIn", delay).
		Msg("the server refused a listing; it stays connected and the listing is retried")
	gen, self, root := a.gen, a.self, a.root
	a.goroutines.start("server.relist-timer", func() {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
			root.Send(self, relistNow{gen: gen, kind: kind})
		case <-ctx.Done():
		}
	})
}

// relistTimer handles a list's retry timer: list that kind again.
func (a *serverActor) relistTimer(m relistNow) {
	r := &a.listRetries[m.kind]
	if m.gen != a.gen || a.sess == nil || r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel, r.at = nil, time.Time{}
	a.relist(m.kind)
}

// listSucceeded clears kind's failure after a listing that worked; it
// reports whether there was one (the view must then be published).
func (a *serverActor) listSucceeded(kind listKind) bool {
	r := &a.listRetries[kind]
	if r.err == nil {
		return false
	}
	a.log.Info().Str("list", kind.name()).Int("failures", r.failed).Msg("the listing the server refused succeeded")
	if r.cancel != nil {
		r.cancel()
	}
	*r = listRetry{}
	return true
}

// forgetListRetries drops the list failures and their timers, when the
// connection they concern ends.
func (a *serverActor) forgetListRetries() {
	for k := range a.listRetries {
		if c := a.listRetries[k].cancel; c != nil {
			c()
		}
		a.listRetries[k] = listRetry{}
	}
}

// listErrors renders the list failures for the view.
func (a *serverActor) listErrors() []ListError {
	var out []ListError
	for k, r := range a.listRetries {
		if r.err != nil {
			out = append(out, ListError{List: listKind(k).name(), Error: r.err.Error(), Failures: r.failed, NextRetry: r.at})
		}
	}
	return out
}

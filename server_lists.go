package mcpvisor

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/mcpvisor/mcpvisor/internal/session"
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

// relister has one job: keeping the live connection's lists current
// after its connect listed them. It re-lists a kind when the server says
// it changed (list_changed, or a listen stream's acknowledgement), at
// most one request in flight per kind; retries the listings the server
// refused; and keeps a stateless-era server's listen stream open.
//
// Concurrency: owned by the server actor's goroutine, like the actor it
// is part of (a), whose lists it updates; its listings and timers run in
// goroutines that only send messages.
type relister struct {
	a *serverActor // the actor whose lists it keeps

	relisting   [numListKinds]bool // a re-list of that kind is in flight
	relistAgain [numListKinds]bool // a list_changed arrived during it
	// listRetries are the lists the live connection's server refused,
	// retried with backoff.
	listRetries [numListKinds]listRetry

	// firstListen is the listen stream the live connection's connect
	// opened before listing: its acknowledgement needs no re-list.
	firstListen *firstListen
}

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

// failedAll records the lists a new connection could not get (errs by
// kind, nil for those it got) and schedules their retries. It reports
// whether there was any (the view must then be published).
func (l *relister) failedAll(errs [numListKinds]error) bool {
	failed := false
	for k, err := range errs {
		if err != nil {
			l.failed(listKind(k), err)
			failed = true
		}
	}
	return failed
}

// failed records that listing kind failed with err, tells
// subscribers, and schedules the next attempt (unless one is scheduled).
// The caller publishes the view.
func (l *relister) failed(kind listKind, err error) {
	a := l.a
	r := &l.listRetries[kind]
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

// timer handles a list's retry timer: list that kind again.
func (l *relister) timer(m relistNow) {
	a := l.a
	r := &l.listRetries[m.kind]
	if m.gen != a.gen || a.sess == nil || r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel, r.at = nil, time.Time{}
	l.relist(m.kind)
}

// succeeded clears kind's failure after a listing that worked; it
// reports whether there was one (the view must then be published).
func (l *relister) succeeded(kind listKind) bool {
	a := l.a
	r := &l.listRetries[kind]
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

// forgetInFlight forgets the re-lists in flight (their answers, of a
// connection that ended, are dropped by generation) and the list_changed
// that arrived during them.
func (l *relister) forgetInFlight() {
	l.relisting, l.relistAgain = [numListKinds]bool{}, [numListKinds]bool{}
}

// forgetRetries drops the list failures and their timers, when the
// connection they concern ends.
func (l *relister) forgetRetries() {
	for k := range l.listRetries {
		if c := l.listRetries[k].cancel; c != nil {
			c()
		}
		l.listRetries[k] = listRetry{}
	}
}

// errors renders the list failures for the view.
func (l *relister) errors() []ListError {
	var out []ListError
	for k, r := range l.listRetries {
		if r.err != nil {
			out = append(out, ListError{List: listKind(k).name(), Error: r.err.Error(), Failures: r.failed, NextRetry: r.at})
		}
	}
	return out
}

// relist re-lists one kind, at most one request in flight per kind; a
// burst of notifications during a re-list costs one more re-list.
func (l *relister) relist(kind listKind) {
	a := l.a
	if l.relisting[kind] {
		l.relistAgain[kind] = true
		return
	}
	l.relisting[kind] = true
	sess, gen, self, root := a.sess, a.gen, a.self, a.root
	timeout := a.connectTimeout()
	pinStore, name, cfg := a.opts.ToolPins.Store, a.h.name, a.cfg
	a.goroutines.start("server.relist", func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var ls lists
		var err, pinErr error
		switch kind {
		case listTools:
			if ls.tools, err = sess.Lists().Tools(ctx); err == nil {
				ls.pins, pinErr = checkPins(pinStore, name, cfg, ls.tools)
			}
		case listResources:
			if ls.resources, err = sess.Lists().Resources(ctx); err == nil {
				ls.templates, err = sess.Lists().ResourceTemplates(ctx)
			}
		case listPrompts:
			ls.prompts, err = sess.Lists().Prompts(ctx)
		}
		root.Send(self, relisted{gen: gen, kind: kind, lists: ls, err: err, pinErr: pinErr})
	})
}

// relisted installs a re-list's result, or schedules its retry.
func (l *relister) relisted(m relisted) {
	a := l.a
	if m.gen != a.gen || a.sess == nil {
		return
	}
	l.relisting[m.kind] = false
	if m.err != nil {
		// Keep the previous list; try again after a backoff delay.
		l.failed(m.kind, m.err) // the session's error names the method
		a.publish()
	} else {
		before := a.lists
		switch m.kind {
		case listTools:
			a.lists.tools, a.lists.pins = m.lists.tools, m.lists.pins
			a.cache.store(m.lists.tools)
		case listResources:
			a.lists.resources, a.lists.templates = m.lists.resources, m.lists.templates
		case listPrompts:
			a.lists.prompts = m.lists.prompts
		}
		if m.kind == listTools {
			// Before the view: the reason a tool leaves the pool comes
			// before the pool's diff (see pinReporter.found).
			a.pinReports.found(m.pinErr)
		}
		recovered := l.succeeded(m.kind)
		// A re-list that finds nothing new (after a listen stream opened,
		// or a spurious list_changed) changes nothing for subscribers.
		if !reflect.DeepEqual(before, a.lists) {
			a.publish()
		} else {
			a.lists = before
			if recovered {
				a.publish()
			}
		}
	}
	if l.relistAgain[m.kind] {
		l.relistAgain[m.kind] = false
		l.relist(m.kind)
	}
}

// Listening (2026-07-28). A stateless-era server sends its notifications
// only on a subscriptions/listen stream, which the server actor keeps open
// for the life of the session: reopened after a drop with a backoff of at
// least ReconnectPolicy.ListenDelay (listenMaxWait at most), so that a
// host cutting streams on a timer cannot cause a reopen loop. After
// ReconnectPolicy.ListenFailures drops in a row that were never
// acknowledged the connection counts as lost.
const (
	listenMaxWait = time.Minute
	listenHealthy = 5 * time.Second // a stream open this long after its ack resets the backoff
)

// startListening opens the listen stream of a ready stateless-era
// session, selecting the list_changed notifications the server offers,
// or takes over first, the stream the connect opened before listing (see
// listen_first.go). Each acknowledgement of the stream re-lists what it
// covers (see notificationRouter.route): changes before the stream opened were not
// announced; the first one's connect listed after it does not.
func (l *relister) startListening(first *firstListen) {
	a := l.a
	sess := a.sess
	subs := listenSubscriptions(sess)
	if subs.IsEmpty() {
		return
	}
	gen, self, root, log := a.gen, a.self, a.root, a.log
	minWait, maxFailures := time.Duration(a.policy.ListenDelay), a.policy.ListenFailures
	loop := func() {
		b := backoff.NewExponentialBackOff()
		b.InitialInterval, b.MaxInterval, b.MaxElapsedTime, b.RandomizationFactor = minWait, listenMaxWait, 0, 0.2
		b.Reset()
		failures := 0
		for {
			opened := time.Now()
			var out session.ListenOutcome
			var err error
			if first != nil {
				opened = first.opened
				out, err = first.stream.Result() // ended: see below
				first = nil
			} else {
				out, err = sess.Subscriptions().Listen(context.Background(), subs)
			}
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
	}
	if first != nil {
		// The connect's stream is open: no goroutine waits for it (an
		// idle server's stream costs the one goroutine holding its
		// request); the loop starts when it ends.
		a.goroutines.startAfter(first.stream.Context(), "server.listen", loop)
		return
	}
	a.goroutines.start("server.listen", loop)
}

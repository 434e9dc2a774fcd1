package mcpvisor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor/internal/routine"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Resource subscriptions in the 2026-07-28 era. resources/subscribe is
// gone: a client opts in to notifications/resources/updated for a set of
// URIs with the resourceSubscriptions filter of a subscriptions/listen
// stream, the server's acknowledgement names the URIs it agreed to, and
// every notification of the stream is tagged with the listen request's id.
//
// mcpvisor holds one such stream per server for the host's resource
// subscriptions, apart from the list_changed stream of startListening: the
// spec allows concurrent streams ("one listening for tools-list changes
// and another for resource updates"), and a stream's filter cannot be
// changed, so a change of the URI set means a new stream; merged, every
// subscribe would also reopen the list_changed stream and make the actor
// re-list tools, prompts and resources. A change opens the stream with the
// new set, waits for its acknowledgement, and only then cancels the old
// stream; the session mutes the old one at the instant the new one is
// acknowledged, so no update is lost or doubled by the switch.
//
// A stream the server drops is reopened with the same set, with a
// backoff (the default ReconnectPolicy.ListenDelay up to listenMaxWait); it ends with its session, and the
// next session's restoreSubscriptions opens it anew.

// ErrSubscriptionRefused: the server's acknowledgement of the listen
// stream left out the URI; it does not offer updates of that resource.
var ErrSubscriptionRefused = errors.New("mcpvisor: the server refused the resource subscription")

// resourceStream is the listen stream carrying one server's resource
// subscriptions. mu serialises changes: it is held while a new stream
// opens and waits for its acknowledgement.
type resourceStream struct {
	mu   chanMutex
	loop *listenLoop // guarded by mu; the stream delivering now, or nil
}

// chanMutex is a mutex whose Lock can give up when a context ends.
type chanMutex chan struct{}

func (m chanMutex) lock(ctx context.Context) error {
	select {
	case m <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m chanMutex) unlock() { <-m }

// listenLoop keeps one listen stream with a fixed URI set open on one
// session, reopening it after a drop.
//
// Concurrency: its goroutine alone writes cur (a one-slot channel) and
// first; uris and agreed do not change once the loop is published; done
// is closed when the goroutine ends.
type listenLoop struct {
	sess   *session.Session
	uris   []string        // sorted
	agreed map[string]bool // the URIs of the first acknowledgement
	cancel context.CancelFunc
	done   chan struct{}
	first  chan listenAck // the first acknowledgement, or why there was none
	cur    chan *session.ListenStream
}

type listenAck struct {
	agreed []string
	err    error
}

// stop cancels the loop's stream (muting it) and the loop.
func (l *listenLoop) stop() {
	select {
	case st := <-l.cur:
		st.Cancel()
		l.cur <- st
	default:
	}
	l.cancel()
}

// current returns the loop's open stream, or nil.
func (l *listenLoop) current() *session.ListenStream {
	select {
	case st := <-l.cur:
		l.cur <- st
		return st
	default:
		return nil
	}
}

// resourceStreamOf returns server's resourceStream, or nil once the
// subscriptions are closed.
func (s *subscriptions) resourceStreamOf(server string) *resourceStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if s.streams == nil {
		s.streams = map[string]*resourceStream{}
	}
	rs := s.streams[server]
	if rs == nil {
		rs = &resourceStream{mu: make(chanMutex, 1)}
		s.streams[server] = rs
	}
	return rs
}

// applyModern makes server's listen stream on sess select the URIs the
// host subscribed now, and returns the URIs the server agreed to. With
// nothing subscribed the stream is cancelled. It returns once the server
// acknowledged the new stream, or with ctx's end (the old stream then
// stays).
func (s *subscriptions) applyModern(ctx context.Context, server string, sess *session.Session, log zerolog.Logger) (map[string]bool, error) {
	rs := s.resourceStreamOf(server)
	if rs == nil {
		return nil, ErrClosed
	}
	if err := rs.mu.lock(ctx); err != nil {
		return nil, err
	}
	defer rs.mu.unlock()
	want := s.uris(server)
	old := rs.loop
	if old != nil && (old.sess != sess || isDone(old.done)) {
		old.stop() // of an ended session, or given up: nothing to hand over
		old, rs.loop = nil, nil
	}
	if old != nil && slices.Equal(old.uris, want) {
		return old.agreed, nil
	}
	if len(want) == 0 {
		if old != nil {
			old.stop()
			rs.loop = nil
		}
		return nil, nil
	}
	var prev *session.ListenStream
	if old != nil {
		prev = old.current()
	}
	l, err := s.startLoop(sess, want, prev, log)
	if err != nil {
		return nil, err
	}
	var ack listenAck
	select {
	case ack = <-l.first:
	case <-ctx.Done():
		l.stop()
		return nil, fmt.Errorf("%s: waiting for the acknowledgement: %w", protocol.MethodSubscriptionsListen, ctx.Err())
	}
	if ack.err != nil {
		l.stop()
		return nil, ack.err
	}
	l.agreed = make(map[string]bool, len(ack.agreed))
	for _, u := range ack.agreed {
		l.agreed[u] = true
	}
	if old != nil {
		old.stop() // muted already, at the new stream's acknowledgement
	}
	rs.loop = l
	return l.agreed, nil
}

// startLoop starts a listenLoop for uris on sess, superseding prev.
func (s *subscriptions) startLoop(sess *session.Session, uris []string, prev *session.ListenStream, log zerolog.Logger) (*listenLoop, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithCancel(s.ctx)
	l := &listenLoop{sess: sess, uris: uris, cancel: cancel, done: make(chan struct{}),
		first: make(chan listenAck, 1), cur: make(chan *session.ListenStream, 1)}
	s.wg.Add(1)
	routine.Go("subscriptions.listen", func() {
		defer s.wg.Done()
		defer close(l.done)
		defer cancel()
		l.run(ctx, prev, log)
	})
	return l, nil
}

// run keeps the stream open until ctx or the session ends. Only the
// first stream supersedes prev; a reopened one replaces nothing.
func (l *listenLoop) run(ctx context.Context, prev *session.ListenStream, log zerolog.Logger) {
	filter := protocol.NotificationSubscriptions{ResourceSubscriptions: l.uris}
	b := backoff.NewExponentialBackOff()
	minWait := time.Duration(defaultPolicy.ListenDelay)
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime, b.RandomizationFactor = minWait, listenMaxWait, 0, 0.2
	b.Reset()
	reported := false
	for {
		st, err := l.sess.Subscriptions().Open(ctx, filter, prev)
		if err != nil {
			if !reported {
				l.first <- listenAck{err: err}
			}
			return
		}
		prev = nil
		if old := l.current(); old != nil {
			<-l.cur
		}
		l.cur <- st
		opened := time.Now()
		select {
		case <-st.Acknowledged():
			agreed := st.Agreed().ResourceSubscriptions
			if !reported {
				reported = true
				l.first <- listenAck{agreed: agreed}
			} else {
				log.Debug().Strs("agreed", agreed).Msg("resource subscriptions listen stream reopened")
			}
		case <-st.Done():
		}
		out, err := st.Result()
		if ctx.Err() != nil || l.sess.Err() != nil {
			if !reported {
				l.first <- listenAck{err: fmt.Errorf("%s: %w", protocol.MethodSubscriptionsListen, errors.Join(err, l.sess.Err(), ctx.Err()))}
			}
			return
		}
		if !reported {
			if err == nil {
				err = errors.New("the server ended the stream before acknowledging it")
			}
			l.first <- listenAck{err: fmt.Errorf("%s: %w", protocol.MethodSubscriptionsListen, err)}
			return
		}
		if out.Acknowledged && time.Since(opened) >= listenHealthy {
			b.Reset()
		}
		wait := max(b.NextBackOff(), minWait)
		log.Debug().Err(err).Dur("reopen_in", wait).Msg("resource subscriptions listen stream ended; reopening")
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		case <-l.sess.Done():
			t.Stop()
			return
		}
	}
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// closeStreams stops every listen loop; the caller then waits for wg.
// The caller holds mu.
func (s *subscriptions) closeStreams() {
	s.cancel()
}

package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/mcpvisor/mcpvisor/internal/routine"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Listen streams that are opened, acknowledged, replaced and cancelled one
// by one (2026-07-28, basic/patterns/subscriptions): the client may hold
// several subscriptions/listen streams at once, each identified by its
// request id, which the server echoes as
// _meta["io.modelcontextprotocol/subscriptionId"] on the acknowledgement
// and on every notification of the stream. There is no request that
// changes a stream's filter: a client that wants another set opens a new
// stream and cancels the old one (on stdio with notifications/cancelled
// naming the listen request, over HTTP by closing its event stream).

// maxRetired bounds how many ended muted streams the session remembers,
// to drop their late notifications.
const maxRetired = 64

// ListenStream is one subscriptions/listen request of OpenListen, open in
// the background until it is cancelled, the server ends it, or the
// session ends.
//
// Concurrency: every method is safe for concurrent use. agreed is written
// once before acked is closed; outcome and err before done is closed.
type ListenStream struct {
	s          *Session
	id         int64
	supersedes *ListenStream
	ctx        context.Context // ends with the stream
	cancel     context.CancelFunc

	ackOnce sync.Once
	acked   chan struct{}
	agreed  protocol.NotificationSubscriptions

	done    chan struct{}
	outcome ListenOutcome
	err     error

	muted atomic.Bool
}

// OpenListen sends subscriptions/listen selecting subs and returns at once;
// the request stays open in the background until ctx ends, Cancel, the
// server ends it, or the session ends. Its notifications arrive through
// the Handler like any other.
//
// supersedes, if not nil, is a stream this one replaces: at the moment
// this stream's acknowledgement arrives (on the receive path, before any
// later frame is handled) supersedes is muted, so that what both streams
// select is delivered once, by the old stream before the switch and by the
// new one after. The caller then cancels supersedes.
//
// In the handshake eras there is nothing to listen to: OpenListen fails
// with ErrVersionMismatch. On an ended session it fails with the session's
// error.
func (s *Session) OpenListen(ctx context.Context, subs protocol.NotificationSubscriptions, supersedes *ListenStream) (*ListenStream, error) {
	if s.modernMeta == nil {
		return nil, fmt.Errorf("%w: subscriptions/listen needs protocol version %s, the session speaks %s", ErrVersionMismatch, protocol.Version20260728, s.version)
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &ListenStream{s: s, id: s.nextID.Add(1), supersedes: supersedes, ctx: ctx, cancel: cancel,
		acked: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		cancel()
		return nil, fmt.Errorf("%s: %w", protocol.MethodSubscriptionsListen, err)
	}
	if s.listens == nil {
		s.listens = make(map[int64]*ListenStream)
	}
	s.listens[l.id] = l
	s.bg.Add(1) // under mu with no error yet: before Close waits for bg
	s.mu.Unlock()

	params := protocol.SubscriptionsListenParams{Meta: s.statelessMeta(), Notifications: subs}
	routine.Go("session.listen", func() {
		defer s.bg.Done()
		s.listening.Add(1)
		_, err := s.roundTripID(ctx, l.id, protocol.MethodSubscriptionsListen, params, 0)
		s.listening.Add(-1)
		cancel()
		s.mu.Lock()
		delete(s.listens, l.id)
		if l.muted.Load() {
			s.retire(l.id)
		}
		s.mu.Unlock()
		select {
		case <-l.acked:
			l.outcome.Acknowledged = true
		default:
		}
		l.outcome.Completed = err == nil
		l.err = err
		close(l.done)
	})
	return l, nil
}

// ID returns the stream's subscription id (its request id).
func (l *ListenStream) ID() protocol.ID { return protocol.Int64ID(l.id) }

// Acknowledged is closed when the server acknowledged the stream.
func (l *ListenStream) Acknowledged() <-chan struct{} { return l.acked }

// Agreed returns the subset of the requested notifications the server
// agreed to honour; valid once Acknowledged is closed.
func (l *ListenStream) Agreed() protocol.NotificationSubscriptions {
	select {
	case <-l.acked:
		return l.agreed
	default:
		return protocol.NotificationSubscriptions{}
	}
}

// Done is closed when the stream has ended.
func (l *ListenStream) Done() <-chan struct{} { return l.done }

// Context returns a context that is cancelled when the request of the
// stream has ended (Done is closed right after) or the stream was
// cancelled: what context.AfterFunc needs to act on the stream's end
// without a goroutine waiting for it.
func (l *ListenStream) Context() context.Context { return l.ctx }

// Result returns how the stream went and why it ended; valid once Done is
// closed. A stream the client cancelled ends with the context's error.
func (l *ListenStream) Result() (ListenOutcome, error) {
	<-l.done
	return l.outcome, l.err
}

// Mute drops the stream's notifications from now on (those already handed
// to the Handler are not recalled).
func (l *ListenStream) Mute() {
	l.muted.Store(true)
	l.s.anyMuted.Store(true)
}

// Cancel mutes the stream and ends it: on stdio the server is sent
// notifications/cancelled naming the listen request; over HTTP its event
// stream is closed, which is the cancellation there. It does not wait for
// the end (see Done).
func (l *ListenStream) Cancel() {
	l.Mute()
	l.cancel()
}

// retire remembers an ended muted stream; the caller holds mu.
func (s *Session) retire(id int64) {
	if s.retired == nil {
		s.retired = make(map[int64]struct{})
	}
	s.retired[id] = struct{}{}
	s.retiredQ = append(s.retiredQ, id)
	if len(s.retiredQ) > maxRetired {
		delete(s.retired, s.retiredQ[0])
		s.retiredQ = s.retiredQ[1:]
	}
}

// acknowledged handles notifications/subscriptions/acknowledged for a
// stream of OpenListen (on the receive path).
func (s *Session) acknowledged(params json.RawMessage) {
	id, ok := subscriptionID(params)
	if !ok {
		return
	}
	s.mu.Lock()
	l := s.listens[id]
	s.mu.Unlock()
	if l == nil {
		return
	}
	var p protocol.SubscriptionsAcknowledgedParams
	_ = json.Unmarshal(params, &p)
	l.ackOnce.Do(func() {
		l.agreed = p.Notifications
		if l.supersedes != nil {
			l.supersedes.Mute()
		}
		close(l.acked)
	})
}

// mutedNotification reports whether a notification belongs to a muted
// stream.
func (s *Session) mutedNotification(params json.RawMessage) bool {
	id, ok := subscriptionID(params)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.listens[id]; l != nil {
		return l.muted.Load()
	}
	_, retired := s.retired[id]
	return retired
}

var subscriptionIDKey = []byte(protocol.MetaSubscriptionID)

// subscriptionID returns the integer subscription id a notification is
// tagged with.
func subscriptionID(params json.RawMessage) (int64, bool) {
	if !bytes.Contains(params, subscriptionIDKey) {
		return 0, false
	}
	var p struct {
		Meta struct {
			ID *protocol.ID `json:"io.modelcontextprotocol/subscriptionId"`
		} `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil || p.Meta.ID == nil {
		return 0, false
	}
	return p.Meta.ID.Int64()
}

// MutedNotifications returns how many notifications were dropped because
// the stream they came on was muted.
func (s *Session) MutedNotifications() int64 { return s.muted.Load() }

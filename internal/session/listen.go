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

// Subscriptions are a session's subscriptions/listen streams (2026-07-28),
// through which a stateless-era server sends its notifications: the
// streams open, the acknowledgements, and the muting of a stream being
// replaced. Reach them with Session.Subscriptions.
//
// Concurrency: every exported method is safe for concurrent use. listens,
// retired and retiredQ are guarded by mu; acknowledged and mutes run on
// the transport's read goroutine; the counters are atomic.
type Subscriptions struct {
	s *Session

	mu       sync.Mutex
	listens  map[int64]*ListenStream // open streams, by subscription id
	retired  map[int64]struct{}      // muted streams that have ended, whose late notifications are still dropped
	retiredQ []int64                 // retired, oldest first (at most maxRetired)

	anyMuted  atomic.Bool  // a stream was ever muted: notifications need the subscription id check
	muted     atomic.Int64 // notifications dropped because their stream was muted
	acks      atomic.Int64 // subscriptions/listen acknowledgements received
	listening atomic.Int64 // subscriptions/listen requests open (not counted in Session.InFlight)
}

// Subscriptions returns the session's subscriptions/listen streams.
func (s *Session) Subscriptions() *Subscriptions { return &s.subs }

// ListenStream is one subscriptions/listen request of Open, open in
// the background until it is cancelled, the server ends it, or the
// session ends.
//
// Concurrency: every method is safe for concurrent use. agreed is written
// once before acked is closed; outcome and err before done is closed.
type ListenStream struct {
	subs       *Subscriptions
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

// Open sends subscriptions/listen selecting subs and returns at once;
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
// In the handshake eras there is nothing to listen to: Open fails
// with ErrVersionMismatch. On an ended session it fails with the session's
// error.
func (sb *Subscriptions) Open(ctx context.Context, subs protocol.NotificationSubscriptions, supersedes *ListenStream) (*ListenStream, error) {
	s := sb.s
	if s.meta.modern == nil {
		return nil, fmt.Errorf("%w: subscriptions/listen needs protocol version %s, the session speaks %s", ErrVersionMismatch, protocol.Version20260728, s.peer.Version)
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &ListenStream{subs: sb, id: s.core.nextID.Add(1), supersedes: supersedes, ctx: ctx, cancel: cancel,
		acked: make(chan struct{}), done: make(chan struct{})}
	// With no error yet, under the core's lock: before Close waits for bg.
	if err := s.core.admit(func() { s.core.bg.Add(1) }); err != nil {
		cancel()
		return nil, fmt.Errorf("%s: %w", protocol.MethodSubscriptionsListen, err)
	}
	sb.mu.Lock()
	if sb.listens == nil {
		sb.listens = make(map[int64]*ListenStream)
	}
	sb.listens[l.id] = l
	sb.mu.Unlock()

	params := protocol.SubscriptionsListenParams{Meta: s.meta.stateless(), Notifications: subs}
	routine.Go("session.listen", func() {
		defer s.core.bg.Done()
		sb.listening.Add(1)
		_, err := s.roundTripID(ctx, l.id, protocol.MethodSubscriptionsListen, params, 0)
		sb.listening.Add(-1)
		cancel()
		sb.mu.Lock()
		delete(sb.listens, l.id)
		if l.muted.Load() {
			sb.retire(l.id)
		}
		sb.mu.Unlock()
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
	l.subs.anyMuted.Store(true)
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
func (sb *Subscriptions) retire(id int64) {
	if sb.retired == nil {
		sb.retired = make(map[int64]struct{})
	}
	sb.retired[id] = struct{}{}
	sb.retiredQ = append(sb.retiredQ, id)
	if len(sb.retiredQ) > maxRetired {
		delete(sb.retired, sb.retiredQ[0])
		sb.retiredQ = sb.retiredQ[1:]
	}
}

// acknowledged handles notifications/subscriptions/acknowledged for a
// stream of Open (on the receive path).
func (sb *Subscriptions) acknowledged(params json.RawMessage) {
	sb.acks.Add(1)
	id, ok := subscriptionID(params)
	if !ok {
		return
	}
	sb.mu.Lock()
	l := sb.listens[id]
	sb.mu.Unlock()
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

// mutes reports whether a notification belongs to a muted stream, and
// counts it if so (on the receive path).
func (sb *Subscriptions) mutes(params json.RawMessage) bool {
	if !sb.anyMuted.Load() {
		return false
	}
	id, ok := subscriptionID(params)
	if !ok {
		return false
	}
	sb.mu.Lock()
	muted := false
	if l := sb.listens[id]; l != nil {
		muted = l.muted.Load()
	} else {
		_, muted = sb.retired[id]
	}
	sb.mu.Unlock()
	if muted {
		sb.muted.Add(1)
	}
	return muted
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

// Muted returns how many notifications were dropped because the stream
// they came on was muted.
func (sb *Subscriptions) Muted() int64 { return sb.muted.Load() }

// Listen holds a subscriptions/listen request (2026-07-28) open until the
// server ends it or ctx ends. The notifications it selects arrive through
// the Handler like any other. In the handshake eras there is nothing to
// listen to: Listen fails with ErrVersionMismatch.
func (sb *Subscriptions) Listen(ctx context.Context, subs protocol.NotificationSubscriptions) (ListenOutcome, error) {
	s := sb.s
	if s.meta.modern == nil {
		return ListenOutcome{}, fmt.Errorf("%w: subscriptions/listen needs protocol version %s, the session speaks %s", ErrVersionMismatch, protocol.Version20260728, s.peer.Version)
	}
	before := sb.acks.Load()
	sb.listening.Add(1)
	defer sb.listening.Add(-1)
	err := s.Call(ctx, protocol.MethodSubscriptionsListen, protocol.SubscriptionsListenParams{Meta: s.meta.stateless(), Notifications: subs}, nil)
	return ListenOutcome{Acknowledged: sb.acks.Load() > before, Completed: err == nil}, err
}

// ListenOutcome says how a subscriptions/listen stream went.
type ListenOutcome struct {
	// Acknowledged is true when the server acknowledged the subscription
	// (notifications/subscriptions/acknowledged) while the stream was open.
	Acknowledged bool
	// Completed is true when the server ended the stream gracefully with
	// a result, rather than by dropping it.
	Completed bool
}

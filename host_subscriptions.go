package mcpvisor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/routine"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Resource subscriptions (resources/subscribe in the handshake eras, a
// subscriptions/listen stream in 2026-07-28 (modernsubs.go); restored on
// every new connection) and polling subscriptions (a tool call or
// resource read repeated at an interval, publishing only changes).

// Errors of subscriptions.
var (
	// ErrSubscribeUnsupported: the server did not declare
	// resources.subscribe.
	ErrSubscribeUnsupported = errors.New("mcpvisor: the server does not support resource subscriptions")
	// ErrUnknownPoll: no polling subscription has that id.
	ErrUnknownPoll = errors.New("mcpvisor: unknown polling subscription")
)

// Polling intervals.
const (
	MinPollInterval     = time.Second
	DefaultPollInterval = 5 * time.Second
)

// subscriptions holds the host's subscriptions, outside any actor so that
// they outlive connections.
//
// Concurrency: mu guards every map, nextPoll and closed; callers
// (Subscribe, Unsubscribe), server actors' goroutines (restoring
// subscriptions) and pollers take it. wg counts the pollers and listen
// loops; ctx ends with close.
type subscriptions struct {
	mu        sync.Mutex
	resources map[string]map[string]bool // server → subscribed URIs
	streams   map[string]*resourceStream // server → its 2026-07-28 listen stream for resources
	polls     map[string]*poll
	nextPoll  uint64
	wg        sync.WaitGroup // running pollers and listen loops
	closed    bool

	ctx    context.Context // ends with close: the listen loops' parent
	cancel context.CancelFunc
}

func newSubscriptions() *subscriptions {
	ctx, cancel := context.WithCancel(context.Background())
	return &subscriptions{resources: map[string]map[string]bool{}, polls: map[string]*poll{}, ctx: ctx, cancel: cancel}
}

// uris returns server's subscribed URIs, sorted.
func (s *subscriptions) uris(server string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.resources[server]))
	for u := range s.resources[server] {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// supportsSubscribe reports whether the server behind sess offers
// resource subscriptions (resources.subscribe, in every era).
func supportsSubscribe(sess *session.Session) bool {
	c := sess.Peer().Capabilities.Resources
	return c != nil && c.Subscribe
}

// listensForResources reports whether sess subscribes to resources with
// subscriptions/listen (2026-07-28) rather than resources/subscribe.
func listensForResources(sess *session.Session) bool {
	return protocol.UsesDiscover(sess.Peer().Version)
}

// SubscribeResource subscribes to updates of a server's resource: each
// update is an EventResourceUpdated. Handshake-era servers get
// resources/subscribe; 2026-07-28 servers a subscriptions/listen stream
// selecting every subscribed URI, replaced by one with the new set on each
// change, and SubscribeResource returns once the server acknowledged it
// (ErrSubscriptionRefused when the acknowledgement leaves the URI out).
// The subscription is sent again on every new connection of the server
// until UnsubscribeResource. Servers that did not declare
// resources.subscribe fail with ErrSubscribeUnsupported.
func (s *Supervisor) SubscribeResource(ctx context.Context, server, uri string) error {
	h, err := s.handle(server)
	if err != nil {
		return err
	}
	subs := s.opts.host.subs
	_, err = onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (struct{}, error) {
		if !supportsSubscribe(sess) {
			return struct{}{}, fmt.Errorf("%w: %q", ErrSubscribeUnsupported, server)
		}
		// Recorded before sending, so that a reconnect racing this
		// request restores it.
		subs.mu.Lock()
		if subs.resources[server] == nil {
			subs.resources[server] = map[string]bool{}
		}
		subs.resources[server][uri] = true
		subs.mu.Unlock()
		if listensForResources(sess) {
			agreed, err := subs.applyModern(ctx, server, sess, s.log)
			if err == nil && !agreed[uri] {
				err = fmt.Errorf("%w: %q on %q (the subscriptions/listen acknowledgement left it out)", ErrSubscriptionRefused, uri, server)
			}
			return struct{}{}, err
		}
		return struct{}{}, sess.Call(ctx, protocol.MethodResourcesSubscribe, protocol.SubscribeParams{URI: uri}, nil)
	})
	if err != nil && !errors.Is(err, ErrSubscribeUnsupported) {
		var lost *ConnectionLostError
		if errors.As(err, &lost) {
			return nil // recorded: the next connection subscribes
		}
		subs.mu.Lock()
		delete(subs.resources[server], uri)
		subs.mu.Unlock()
	}
	return err
}

// UnsubscribeResource ends a resource subscription.
func (s *Supervisor) UnsubscribeResource(ctx context.Context, server, uri string) error {
	h, err := s.handle(server)
	if err != nil {
		return err
	}
	subs := s.opts.host.subs
	subs.mu.Lock()
	had := subs.resources[server][uri]
	delete(subs.resources[server], uri)
	subs.mu.Unlock()
	if !had {
		return nil
	}
	v, err := ready(h)
	if err != nil || !supportsSubscribe(v.sess) {
		return nil // the next connection simply does not subscribe
	}
	ctx, cancel := withDefaultTimeout(ctx, s.callTimeout(h))
	defer cancel()
	if listensForResources(v.sess) {
		_, err := subs.applyModern(ctx, server, v.sess, s.log)
		return err
	}
	return v.sess.Call(ctx, protocol.MethodResourcesUnsubscribe, protocol.SubscribeParams{URI: uri}, nil)
}

// ResourceSubscriptions returns the URIs subscribed on a server.
func (s *Supervisor) ResourceSubscriptions(server string) []string {
	return s.opts.host.subs.uris(server)
}

// restoreSubscriptions subscribes again to every URI the host subscribed,
// on a new connection (in a goroutine of the actor's): resources/subscribe
// for each, or one subscriptions/listen stream selecting them all.
func (a *serverActor) restoreSubscriptions() {
	if a.opts.host == nil || !supportsSubscribe(a.sess) {
		return
	}
	subs := a.opts.host.subs
	uris := subs.uris(a.h.name)
	if len(uris) == 0 {
		return
	}
	sess, log, timeout, name := a.sess, a.log, a.connectTimeout(), a.h.name
	if listensForResources(sess) {
		a.goroutines.start("server.resubscribe", func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			agreed, err := subs.applyModern(ctx, name, sess, log)
			if err != nil {
				if sess.Err() == nil {
					log.Warn().Err(err).Strs("uris", uris).Msg("could not restore the resource subscriptions")
				}
				return
			}
			for _, uri := range uris {
				if !agreed[uri] {
					log.Warn().Str("uri", uri).Msg("the server no longer agrees to a resource subscription")
				}
			}
			log.Debug().Int("uris", len(uris)).Msg("resource subscriptions restored")
		})
		return
	}
	a.goroutines.start("server.resubscribe", func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		for _, uri := range uris {
			if err := sess.Call(ctx, protocol.MethodResourcesSubscribe, protocol.SubscribeParams{URI: uri}, nil); err != nil {
				log.Warn().Err(err).Str("uri", uri).Msg("could not restore a resource subscription")
			}
		}
		log.Debug().Int("uris", len(uris)).Msg("resource subscriptions restored")
	})
}

// poll is one polling subscription.
//
// Concurrency: read-only once in subscriptions.polls, but for done,
// closed by its goroutine when it ends.
type poll struct {
	id     string
	spec   PollSpec
	cancel context.CancelFunc
	done   chan struct{}
}

// SubscribePolling polls a tool call or a resource read at an interval and
// publishes an EventPollChanged for the first result and for every result
// that differs from the one before; polling carries on across reconnects
// until UnsubscribePolling or Close. It returns the subscription's id.
func (s *Supervisor) SubscribePolling(spec PollSpec) (string, error) {
	switch {
	case spec.Tool != "" && spec.URI != "":
		return "", errors.New("mcpvisor: a poll is a tool call or a resource read, not both")
	case spec.Tool == "" && (spec.URI == "" || spec.Server == ""):
		return "", errors.New("mcpvisor: a poll needs a tool, or a server and a URI")
	case spec.Tool != "":
		if _, ok := s.pool.Load().toolsByName.Get(spec.Tool); !ok {
			if _, ok := s.pool.Load().builtinByName[spec.Tool]; !ok {
				return "", fmt.Errorf("%w: %q", ErrUnknownTool, spec.Tool)
			}
		}
	default:
		if _, err := s.handle(spec.Server); err != nil {
			return "", err
		}
	}
	if spec.Interval == 0 {
		spec.Interval = DefaultPollInterval
	}
	spec.Interval = max(spec.Interval, MinPollInterval)
	subs := s.opts.host.subs
	subs.mu.Lock()
	defer subs.mu.Unlock()
	if subs.closed {
		return "", ErrClosed
	}
	subs.nextPoll++
	ctx, cancel := context.WithCancel(context.Background())
	p := &poll{id: "poll-" + strconv.FormatUint(subs.nextPoll, 10), spec: spec, cancel: cancel, done: make(chan struct{})}
	subs.polls[p.id] = p
	subs.wg.Add(1)
	routine.Go("subscriptions.poll", func() {
		defer subs.wg.Done()
		defer close(p.done)
		s.runPoll(ctx, p)
	})
	return p.id, nil
}

// UnsubscribePolling stops a polling subscription (ErrUnknownPoll for an
// unknown id); it returns once the poller has stopped.
func (s *Supervisor) UnsubscribePolling(id string) error {
	subs := s.opts.host.subs
	subs.mu.Lock()
	p, ok := subs.polls[id]
	delete(subs.polls, id)
	subs.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownPoll, id)
	}
	p.cancel()
	<-p.done
	return nil
}

// Polls returns the live polling subscriptions by id.
func (s *Supervisor) Polls() map[string]PollSpec {
	subs := s.opts.host.subs
	subs.mu.Lock()
	defer subs.mu.Unlock()
	out := make(map[string]PollSpec, len(subs.polls))
	for id, p := range subs.polls {
		out[id] = p.spec
	}
	return out
}

// runPoll polls until ctx ends.
func (s *Supervisor) runPoll(ctx context.Context, p *poll) {
	var last [sha256.Size]byte
	first := true
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, p.spec.Interval)
		data, h, err := s.pollOnce(pctx, p.spec)
		cancel()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				s.log.Debug().Err(err).Str("poll", p.id).Msg("poll failed")
			}
		default:
			sum := sha256.Sum256(data)
			if first || sum != last {
				first, last = false, sum
				ev := eventRecord{Type: EventPollChanged, PollID: p.id, URI: p.spec.URI, Data: data}
				if h != nil {
					s.system.Root.Send(s.registry, serverEvent{handle: h, event: ev})
				}
			}
		}
		t.Reset(p.spec.Interval)
	}
}

// pollOnce runs one poll and returns its result's JSON and the server
// polled.
func (s *Supervisor) pollOnce(ctx context.Context, spec PollSpec) (json.RawMessage, *serverHandle, error) {
	if spec.Tool != "" {
		e, ok := s.pool.Load().toolsByName.Get(spec.Tool)
		if !ok {
			return nil, nil, fmt.Errorf("%w: %q", ErrUnknownTool, spec.Tool)
		}
		res, err := s.CallTool(ctx, spec.Tool, spec.Args)
		if err != nil {
			return nil, e.h, err
		}
		res.Meta = nil // per-call metadata is not a change
		data, err := json.Marshal(res)
		return data, e.h, err
	}
	h, err := s.handle(spec.Server)
	if err != nil {
		return nil, nil, err
	}
	res, err := s.ReadResource(ctx, spec.Server, spec.URI)
	if err != nil {
		return nil, h, err
	}
	res.Meta = nil
	var buf bytes.Buffer
	err = json.NewEncoder(&buf).Encode(res)
	return bytes.TrimSpace(buf.Bytes()), h, err
}

// close stops every poller and listen loop and waits for them.
func (s *subscriptions) close() {
	s.mu.Lock()
	s.closed = true
	polls := s.polls
	s.polls = map[string]*poll{}
	s.cancel() // every listen loop ends, and cancels its stream
	s.mu.Unlock()
	for _, p := range polls {
		p.cancel()
	}
	s.wg.Wait()
}

package mcpvisor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

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

// runPoll polls until ctx ends.
func (pl Polling) runPoll(ctx context.Context, p *poll) {
	s := pl.s
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
		data, h, err := pl.pollOnce(pctx, p.spec)
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
					s.reg.send(serverEvent{handle: h, event: ev})
				}
			}
		}
		t.Reset(p.spec.Interval)
	}
}

// pollOnce runs one poll and returns its result's JSON and the server
// polled.
func (pl Polling) pollOnce(ctx context.Context, spec PollSpec) (json.RawMessage, *serverHandle, error) {
	s := pl.s
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
	res, err := s.Resources().Read(ctx, spec.Server, spec.URI)
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

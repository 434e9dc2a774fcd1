package streamable

import (
	"context"
	"sync"
)

// EndLimiter bounds the session-ending DELETEs in flight to each host
// (host:port) for the sessions that share it, so that closing many
// sessions of one server at once reuses the shared client's keep-alive
// connections instead of dialing one connection per session: closing
// 10,000 sessions at once otherwise opened 10,000 connections, and the
// kernel's search for free ephemeral ports made those connects cost
// seconds of CPU. A DELETE that cannot get a slot before its deadline is
// skipped: the spec asks clients to end sessions they no longer need
// (SHOULD), and the server forgets an abandoned session by itself.
//
// A nil *EndLimiter sets no bound. The zero value is not usable: use
// NewEndLimiter.
//
// Concurrency: safe for concurrent use by any number of sessions.
type EndLimiter struct {
	perHost int

	mu    sync.Mutex
	hosts map[string]*endSlots // guarded by mu; an entry lives while someone holds or waits for it
}

// endSlots is one host's semaphore and how many hold or wait for it.
type endSlots struct {
	slots chan struct{}
	users int // guarded by EndLimiter.mu
}

// NewEndLimiter returns a limiter that lets perHost DELETEs run at once
// to each host; perHost ≤ 0 means 64, the shared HTTP client's idle
// connections per host.
func NewEndLimiter(perHost int) *EndLimiter {
	if perHost <= 0 {
		perHost = 64
	}
	return &EndLimiter{perHost: perHost, hosts: make(map[string]*endSlots)}
}

// acquire waits for a slot for host until ctx ends. It returns the
// release to call when the DELETE is done, or ok false when ctx ended
// first.
func (l *EndLimiter) acquire(ctx context.Context, host string) (release func(), ok bool) {
	if l == nil {
		return func() {}, true
	}
	l.mu.Lock()
	s := l.hosts[host]
	if s == nil {
		s = &endSlots{slots: make(chan struct{}, l.perHost)}
		l.hosts[host] = s
	}
	s.users++
	l.mu.Unlock()
	done := func() {
		l.mu.Lock()
		if s.users--; s.users == 0 {
			delete(l.hosts, host)
		}
		l.mu.Unlock()
	}
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots; done() }, true
	case <-ctx.Done():
		done()
		return nil, false
	}
}

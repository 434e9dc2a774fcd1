package gateway

import (
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Defaults of the gateway's bounds (Options.MaxSessions,
// Options.MaxStreamsPerSession).
const (
	// DefaultMaxSessions bounds the HTTP sessions kept at once. A session
	// costs about 1.5 KB idle (more with notifications waiting in its
	// outbox), so the cap keeps a flood of initialize requests that are
	// never closed to a couple of MB, while leaving a thousand clients
	// room.
	DefaultMaxSessions = 1000
	// DefaultMaxStreamsPerSession bounds the GET streams open at once on
	// one session: one is what a client needs, a few leave room for one
	// reconnecting before the old stream is noticed gone.
	DefaultMaxStreamsPerSession = 4
)

// admitSession registers the new HTTP session s, first evicting the
// longest-idle sessions when the cap would be passed. Sessions without
// requests in flight or open streams go first; a busy one is evicted only
// when every other session is busy too (the cap is a bound, not a wish).
// An evicted session ends as if its client had sent DELETE: its requests
// are cancelled, its streams end, and its next request gets 404, which
// tells the client to initialize a new session.
//
// Finding the longest idle is a scan of every session under g.mu, so at
// the cap it evicts a 64th of the cap at once (at least one): a flood of
// new sessions costs one scan per 64 of them, not one each.
func (g *Gateway) admitSession(s *session) {
	limit := g.opts.MaxSessions
	var evicted []*session
	g.mu.Lock()
	if limit > 0 && len(g.sessions) >= limit { // cheap test first: the map also holds stdio sessions
		evicted = g.evictLocked(limit - max(1, limit/64))
	}
	g.sessions[s.id] = s
	g.mu.Unlock()
	for _, e := range evicted {
		g.log.Debug().Str("session", e.id).Msg("session evicted: the gateway's session cap was reached")
		e.close()
	}
	g.metrics.sessionsEvicted.Add(uint64(len(evicted)))
}

// evictLocked removes HTTP sessions, longest idle first (idle before
// busy), until at most keep remain, and returns them. Called with g.mu
// held.
func (g *Gateway) evictLocked(keep int) []*session {
	type candidate struct {
		s        *session
		lastUsed time.Time
		busy     bool
	}
	var all []candidate
	for _, s := range g.sessions {
		if s.out == nil {
			continue // stdio: never evicted, not counted
		}
		s.mu.Lock()
		c := candidate{s: s, lastUsed: s.lastUsed, busy: len(s.cancels) > 0 || s.streams > 0}
		s.mu.Unlock()
		all = append(all, c)
	}
	// evictFirst reports whether a goes before b: idle before busy, then
	// the longest unused.
	evictFirst := func(a, b candidate) bool {
		if a.busy != b.busy {
			return !a.busy
		}
		return a.lastUsed.Before(b.lastUsed)
	}
	if len(all) <= keep {
		return nil
	}
	slices.SortFunc(all, func(a, b candidate) int {
		switch {
		case evictFirst(a, b):
			return -1
		case evictFirst(b, a):
			return 1
		}
		return 0
	})
	out := make([]*session, 0, len(all)-keep)
	for _, c := range all[:len(all)-keep] {
		delete(g.sessions, c.s.id)
		out = append(out, c.s)
	}
	return out
}

// openStream counts a GET stream in, unless the session has
// Options.MaxStreamsPerSession open already; closeStream counts it out.
func (s *session) openStream(limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit > 0 && s.streams >= limit {
		return false
	}
	s.streams++
	return true
}

func (s *session) closeStream() {
	s.mu.Lock()
	s.streams--
	s.mu.Unlock()
}

// refuseStream answers a GET stream over the session's cap: 409 Conflict,
// as other servers answer a second stream where they allow one.
func (g *Gateway) refuseStream(w http.ResponseWriter) {
	g.metrics.streamsRefused.Add(1)
	httpError(w, http.StatusConflict, "conflict: this session has "+strconv.Itoa(g.opts.MaxStreamsPerSession)+
		" GET streams open already (the most it may have)")
}

package mcpserver

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// sessionTable is the Server's table of what is open: the sessions that
// have a channel of their own (HTTP sessions and connections), HTTP
// sessions by id, and the subscriptions/listen streams; its admission of
// HTTP sessions at HTTPOptions.MaxSessions and Options.MaxRetained, by
// eviction; and whether the Server is shutting down.
//
// Concurrency: everything but the constants (log, budget, maxSessions)
// and evicted is guarded by mu. mu is taken before any session's lock,
// never after.
type sessionTable struct {
	log         zerolog.Logger
	budget      *budget
	maxSessions int // HTTPOptions.MaxSessions

	mu       sync.Mutex
	sessions map[*Session]struct{}  // sessions that have a channel: HTTP sessions and connections
	byID     map[string]*Session    // HTTP sessions by Mcp-Session-Id
	listens  map[*listener]struct{} // open subscriptions/listen streams
	shut     bool                   // Shutdown or Close was called
	closing  chan struct{}          // closed by Shutdown: streams end

	evicted atomic.Uint64 // HTTP sessions evicted (Stats.SessionsEvicted)
}

// counts returns the table's part of Stats.
func (t *sessionTable) counts() Stats {
	t.mu.Lock()
	st := Stats{Sessions: len(t.sessions), Listens: len(t.listens)}
	t.mu.Unlock()
	st.SessionsEvicted = t.evicted.Load()
	return st
}

// snapshot returns the sessions that have a channel.
func (t *sessionTable) snapshot() []*Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Session, 0, len(t.sessions))
	for sess := range t.sessions {
		out = append(out, sess)
	}
	return out
}

// listeners returns the open listen streams.
func (t *sessionTable) listeners() []*listener {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*listener, 0, len(t.listens))
	for l := range t.listens {
		out = append(out, l)
	}
	return out
}

// addListener registers listen stream l, unless the Server is shutting
// down (false).
func (t *sessionTable) addListener(l *listener) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shut {
		return false
	}
	t.listens[l] = struct{}{}
	return true
}

// shutdown marks the Server shutting down, once, and returns the
// sessions open.
func (t *sessionTable) shutdown() []*Session {
	t.mu.Lock()
	if !t.shut {
		t.shut = true
		close(t.closing)
	}
	t.mu.Unlock()
	return t.snapshot()
}

// shutting reports whether Shutdown was called.
func (t *sessionTable) shutting() bool {
	select {
	case <-t.closing:
		return true
	default:
		return false
	}
}

// idle returns the HTTP sessions unused for longer than idle as of now.
func (t *sessionTable) idle(now time.Time, idle time.Duration) []*Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	var old []*Session
	for _, sess := range t.byID {
		sess.mu.Lock()
		if now.Sub(sess.lastUsed) > idle {
			old = append(old, sess)
		}
		sess.mu.Unlock()
	}
	return old
}

// track registers an HTTP session or a connection.
func (t *sessionTable) track(sess *Session) {
	t.mu.Lock()
	t.sessions[sess] = struct{}{}
	if sess.id != "" {
		t.byID[sess.id] = sess
	}
	sess.mu.Lock()
	if !sess.closed && sess.bytes.overhead == 0 {
		sess.bytes.overhead = sessionOverhead
		t.budget.retained.Add(sessionOverhead)
	}
	sess.mu.Unlock()
	t.mu.Unlock()
}

// forget removes a closed session from the tables.
func (t *sessionTable) forget(sess *Session) {
	t.mu.Lock()
	delete(t.sessions, sess)
	if sess.id != "" && t.byID[sess.id] == sess {
		delete(t.byID, sess.id)
	}
	t.mu.Unlock()
}

// lookup returns the HTTP session id.
func (t *sessionTable) lookup(id string) *Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

// admit registers the new HTTP session sess, charging it its overhead,
// its state and extra more bytes (those of the initialize that opens it,
// which its per-session bound was checked against), first evicting the
// longest idle sessions when HTTPOptions.MaxSessions or
// Options.MaxRetained would be passed. Sessions without requests in
// flight or streams open go first; a busy one goes only when every other
// session is busy too (the cap is a bound, not a wish). Finding the
// longest idle is a scan of every session, so at the session cap a 64th
// of the cap goes at once (at least one), and at the byte bound sessions
// go until a 64th of it is free besides sess: a flood of new sessions
// costs one scan per many of them, not one each. When a session by sess's
// id is held already (two requests restored one sealed session at once),
// that one is returned and sess is dropped. With extra > 0, nil is
// returned (and nothing done) when even with every HTTP session evicted
// sess would pass Options.MaxRetained (what holds the rest are
// connections and stateless-era listen streams).
func (t *sessionTable) admit(sess *Session, extra int64) *Session {
	limit := t.maxSessions
	t.mu.Lock()
	if held := t.byID[sess.id]; held != nil {
		t.mu.Unlock()
		return held
	}
	keep := len(t.byID)
	if limit > 0 && len(t.byID) >= limit {
		keep = limit - max(1, limit/64)
	}
	overhead := int64(sessionOverhead)
	if sess.sealed != nil {
		// A sealed id carries the client's info and capabilities once
		// more: part of the session's fixed cost (in the total, not in
		// its own bound).
		overhead += int64(len(sess.id))
	}
	sess.mu.Lock()
	need := overhead + sess.bytes.state + extra
	sess.mu.Unlock()
	var goal int64 = -1 // the total to get down to before sess is charged; -1: no need
	if m := t.budget.maxRetained; m > 0 && t.budget.retained.Load()+need > m {
		goal = max(m-m/64-need, 0)
	}
	evicted, forBytes := t.evictLocked(keep, goal)
	if extra > 0 && t.budget.maxRetained > 0 && t.budget.retained.Load()+need > t.budget.maxRetained {
		t.mu.Unlock()
		t.closeEvicted(evicted, forBytes)
		return nil
	}
	sess.mu.Lock()
	sess.bytes.overhead = overhead
	sess.bytes.initState += extra
	sess.bytes.state += extra
	t.budget.retained.Add(sess.bytes.overhead + sess.bytes.state)
	sess.mu.Unlock()
	t.sessions[sess] = struct{}{}
	t.byID[sess.id] = sess
	t.mu.Unlock()
	t.closeEvicted(evicted, forBytes)
	return sess
}

// closeEvicted closes the sessions evictLocked removed and counts them.
func (t *sessionTable) closeEvicted(evicted []*Session, forBytes int) {
	for _, e := range evicted {
		t.log.Debug().Str("session", sessionTag(e.id)).Msg("session evicted: the session cap or the byte bound was reached")
		e.Close()
	}
	t.evicted.Add(uint64(len(evicted)))
	t.budget.evictedForBytes.Add(uint64(forBytes))
}

// evictLocked removes HTTP sessions, idle before busy and longest unused
// first, until at most keep remain and (goal ≥ 0) the Server's total
// less what they hold is at most goal, and returns them, with how many
// went for the bytes alone. Called with t.mu held.
func (t *sessionTable) evictLocked(keep int, goal int64) ([]*Session, int) {
	if len(t.byID) <= keep && goal < 0 {
		return nil, 0
	}
	type candidate struct {
		s        *Session
		lastUsed time.Time
		busy     bool
		bytes    int64
	}
	all := make([]candidate, 0, len(t.byID))
	for _, sess := range t.byID {
		sess.mu.Lock()
		all = append(all, candidate{s: sess, lastUsed: sess.lastUsed, busy: len(sess.inflight) > 0 || sess.streams.open() > 0,
			bytes: sess.bytes.state + sess.bytes.overhead})
		sess.mu.Unlock()
	}
	slices.SortFunc(all, func(a, b candidate) int {
		switch {
		case a.busy != b.busy:
			if !a.busy {
				return -1
			}
			return 1
		case a.lastUsed.Before(b.lastUsed):
			return -1
		case b.lastUsed.Before(a.lastUsed):
			return 1
		}
		return 0
	})
	total := t.budget.retained.Load()
	var out []*Session
	forBytes := 0
	for i, c := range all {
		overCount := len(all)-i > keep
		overBytes := goal >= 0 && total > goal
		if !overCount && !overBytes {
			break
		}
		if !overCount {
			forBytes++
		}
		delete(t.byID, c.s.id)
		delete(t.sessions, c.s)
		// Out of the total at once, so that the next admission does
		// not evict for bytes that are on their way out (Close, once
		// s.mu is released, takes out what it gains meanwhile).
		c.s.mu.Lock()
		c.s.bytes.release()
		c.s.mu.Unlock()
		out = append(out, c.s)
		total -= c.bytes
	}
	return out, forBytes
}

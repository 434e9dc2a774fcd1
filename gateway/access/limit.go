package access

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// ErrRateLimited is matched (errors.Is) by the error of Limiter.Acquire
// for a call over its caller's limit; errors.As gives the *LimitError.
var ErrRateLimited = errors.New("access: rate limit exceeded")

// LimitError is a call refused by a rate limit: Kind "rate" (calls per
// second) or "concurrent" (calls at once), and when to retry.
type LimitError struct {
	Kind       string
	Limit      Limit
	RetryAfter time.Duration
}

func (e *LimitError) Error() string {
	if e.Limit.IsZero() { // as a client read it (gateway.Refusal)
		return fmt.Sprintf("rate limited (%s); retry after %dms", e.Kind, e.RetryAfter.Milliseconds())
	}
	if e.Kind == "concurrent" {
		return fmt.Sprintf("rate limited: at most %d concurrent calls; retry after %dms", e.Limit.Concurrent, e.RetryAfter.Milliseconds())
	}
	return fmt.Sprintf("rate limited: at most %g calls per second; retry after %dms", e.Limit.PerSecond, e.RetryAfter.Milliseconds())
}

// Unwrap makes a LimitError match ErrRateLimited.
func (e *LimitError) Unwrap() error { return ErrRateLimited }

// concurrentRetry is the retry hint of a call refused for concurrency:
// when one of the calls in flight ends is unknown.
const concurrentRetry = 100 * time.Millisecond

// DefaultMaxKeys is the number of callers a Limiter tracks by default.
const DefaultMaxKeys = 10000

// DefaultIdle is how long a caller's state is kept by default after its
// last call (once its bucket is full again and no call is in flight).
const DefaultIdle = 10 * time.Minute

// LimiterOptions configure a Limiter; the zero value is usable.
type LimiterOptions struct {
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Idle is how long an idle caller's state is kept (default
	// DefaultIdle): a caller whose bucket is full and has no call in
	// flight is forgotten after it, which loses nothing.
	Idle time.Duration
	// MaxKeys bounds the callers tracked (default DefaultMaxKeys): past
	// it, idle callers are forgotten first; when none is idle, a new
	// caller is refused as rate limited.
	MaxKeys int
}

// Limiter enforces Limits per caller key: a token bucket for the calls
// per second and a count of the calls in flight. Its memory is bounded
// (LimiterOptions.MaxKeys; idle callers expire).
//
// Concurrency: safe for concurrent use; one mutex guards the table.
type Limiter struct {
	opts LimiterOptions

	mu        sync.Mutex
	callers   map[string]*callerState
	lastSweep time.Time
}

type callerState struct {
	tokens   float64
	last     time.Time // when tokens was computed
	inflight int
	burst    float64
	rate     float64 // the PerSecond of the latest call
}

// NewLimiter returns a Limiter with o's options.
func NewLimiter(o LimiterOptions) *Limiter {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	return &Limiter{opts: o, callers: map[string]*callerState{}}
}

// Acquire admits a call of the caller key under l, or refuses it with a
// *LimitError (errors.Is ErrRateLimited). An admitted call must call
// release once it ends (it counts against Concurrent until then). A zero
// l admits every call and tracks nothing.
func (lm *Limiter) Acquire(key string, l Limit) (release func(), err error) {
	if l.IsZero() {
		return func() {}, nil
	}
	now := lm.opts.Now()
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if now.Sub(lm.lastSweep) >= lm.opts.Idle {
		lm.sweep(now)
	}
	burst := float64(l.Burst)
	if burst == 0 {
		burst = max(1, math.Ceil(l.PerSecond))
	}
	c := lm.callers[key]
	if c == nil {
		if len(lm.callers) >= lm.opts.MaxKeys {
			lm.sweep(now)
			if len(lm.callers) >= lm.opts.MaxKeys {
				return nil, &LimitError{Kind: "rate", Limit: l, RetryAfter: time.Second}
			}
		}
		c = &callerState{tokens: burst, last: now, burst: burst}
		lm.callers[key] = c
	}
	if c.burst != burst { // the limit changed (reload)
		c.tokens, c.burst = min(c.tokens, burst), burst
	}
	if el := now.Sub(c.last); el > 0 && l.PerSecond > 0 {
		c.tokens = min(burst, c.tokens+el.Seconds()*l.PerSecond)
	}
	c.last, c.rate = now, l.PerSecond
	if l.Concurrent > 0 && c.inflight >= l.Concurrent {
		return nil, &LimitError{Kind: "concurrent", Limit: l, RetryAfter: concurrentRetry}
	}
	if l.PerSecond > 0 {
		if c.tokens < 1 {
			// Whole milliseconds, rounded up (less a float's noise).
			ms := math.Ceil((1-c.tokens)/l.PerSecond*1000 - 1e-6)
			return nil, &LimitError{Kind: "rate", Limit: l, RetryAfter: max(time.Duration(ms)*time.Millisecond, time.Millisecond)}
		}
		c.tokens--
	}
	c.inflight++
	var once sync.Once
	return func() {
		once.Do(func() {
			lm.mu.Lock()
			c.inflight--
			lm.mu.Unlock()
		})
	}, nil
}

// sweep forgets the callers idle for opts.Idle with no call in flight
// and, by then, a full bucket. Called with mu held.
func (lm *Limiter) sweep(now time.Time) {
	lm.lastSweep = now
	for k, c := range lm.callers {
		idle := now.Sub(c.last)
		full := c.rate == 0 || c.tokens+idle.Seconds()*c.rate >= c.burst
		if c.inflight == 0 && idle >= lm.opts.Idle && full {
			delete(lm.callers, k)
		}
	}
}

// Len returns the number of callers tracked.
func (lm *Limiter) Len() int {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	return len(lm.callers)
}

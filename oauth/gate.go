package oauth

import (
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/rs/zerolog"
)

// asGate is the part of a Source that holds back traffic to the
// authorization server after a transient failure (an exponential backoff)
// and remembers the last failure for Status. Its own mu guards its state;
// it calls nothing of the Source, so it may be called with Source.mu held
// (the order is Source.mu, then asGate.mu).
type asGate struct {
	now func() time.Time
	log zerolog.Logger

	mu      sync.Mutex
	bo      *backoff.ExponentialBackOff
	retryAt time.Time // no AS traffic before this, after a transient failure
	lastErr string    // see Status.LastError
}

type clockFunc func() time.Time

func (c clockFunc) Now() time.Time { return c() }

// newASGate returns the gate of cfg's backoff (RefreshBackoff doubling up
// to MaxRefreshBackoff).
func newASGate(cfg *Config, now func() time.Time, log zerolog.Logger) *asGate {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = cfg.RefreshBackoff
	b.MaxInterval = cfg.MaxRefreshBackoff
	b.Multiplier = 2
	b.RandomizationFactor = 0.2
	b.MaxElapsedTime = 0
	b.Clock = clockFunc(now)
	b.Reset()
	return &asGate{now: now, log: log, bo: b}
}

// check refuses authorization server traffic during a backoff delay
// (ErrBackoff).
func (g *asGate) check() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now := g.now(); now.Before(g.retryAt) {
		return fmt.Errorf("%w (next attempt in %s)", ErrBackoff, g.retryAt.Sub(now).Round(time.Second))
	}
	return nil
}

// outcome updates the backoff after authorization server traffic.
func (g *asGate) outcome(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		g.lastErr = err.Error()
	} else {
		g.lastErr = ""
	}
	if err != nil && isTransient(err) {
		d := g.bo.NextBackOff()
		g.retryAt = g.now().Add(d)
		g.log.Warn().Err(err).Dur("retry_in", d).Msg("authorization server unavailable; backing off")
		return
	}
	if err == nil {
		g.bo.Reset()
		g.retryAt = time.Time{}
	}
}

// failed records err as the last failure without touching the backoff
// (outcome has run for the same request; err is the redacted account).
func (g *asGate) failed(err error) {
	g.mu.Lock()
	g.lastErr = err.Error()
	g.mu.Unlock()
}

// state returns when the server is contacted again and the last failure.
func (g *asGate) state() (retryAt time.Time, lastErr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.retryAt, g.lastErr
}

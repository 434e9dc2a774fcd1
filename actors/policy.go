package actors

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// ReconnectPolicy says how a server's connection is healed. A zero field
// means its default; a server's own policy (ServerConfig.Reconnect)
// overrides Options.Reconnect field by field.
//
// An episode starts when a connection is lost or a connect fails, and ends
// when a connection has stayed up for StableAfter (or when the server is
// woken by Reconnect or a config change). Within an episode the server
// makes at most MaxAttempts connect attempts: the first at once when the
// connection simply ended (the process exited, the transport closed),
// every other one after an exponential backoff with jitter. When the
// budget is spent the server is parked in StateFailed, where it costs
// nothing until woken.
type ReconnectPolicy struct {
	// Strikes is how many consecutive transient transport errors on a live
	// connection (reset, refused, a transport timeout, HTTP 5xx) close it
	// for a reconnect. A successful exchange clears them. Default 3.
	Strikes int `json:"strikes,omitempty"`
	// MaxAttempts bounds the connect attempts of one episode. Default 6;
	// a negative value means none: a failure parks the server at once
	// (one-shot tools that report what they find).
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// InitialDelay is the first backoff delay; each next one is Multiplier
	// times longer, up to MaxDelay. Defaults 500 ms, 2, 30 s.
	InitialDelay Duration `json:"initialDelay,omitempty"`
	Multiplier   float64  `json:"multiplier,omitempty"`
	MaxDelay     Duration `json:"maxDelay,omitempty"`
	// Jitter randomizes each delay by ±Jitter of itself. Default 0.3; a
	// negative value means none.
	Jitter float64 `json:"jitter,omitempty"`
	// StableAfter is how long a connection must stay up for the episode to
	// end: strikes, attempts and backoff start over. Default 60 s.
	StableAfter Duration `json:"stableAfter,omitempty"`

	// ProbeAfter and ProbeTimeout notice a server that stopped answering
	// (deadlocked, blocked on its own upstream, no longer reading its
	// input). A server with calls in flight is at work, not hung (one
	// that handles a request at a time cannot answer a ping meanwhile):
	// it is never probed; each call is bounded by its own deadline. When
	// the server owes nothing, a call was given up since it last sent
	// anything (a deadline passed, or the caller cancelled), and it has
	// sent nothing for ProbeAfter, it gets a ping; a ping unanswered
	// within ProbeTimeout with still nothing received is a strike
	// (ErrUnresponsive), and the next probe follows at once. Any answer
	// (even an error) or any frame from the server clears the
	// suspicion; nor is a server probed while the host answers one of
	// its own requests. With the defaults (15 s, 10 s, 3 strikes) a hung
	// server is reconnected about 30 s after its last call ended (at
	// most a minute). A negative ProbeAfter turns the probes off. See
	// docs/supervision.md.
	ProbeAfter   Duration `json:"probeAfter,omitempty"`
	ProbeTimeout Duration `json:"probeTimeout,omitempty"`

	// ListenDelay and ListenFailures govern the subscriptions/listen
	// stream of a 2026-07-28 server, its only channel for notifications.
	// A dropped stream is reopened after ListenDelay at the least, the
	// wait doubling up to a minute (a stream that stayed open 5 s after
	// its acknowledgement starts the wait over), so that a proxy cutting
	// streams on a timer cannot cause a reopen loop. ListenFailures drops
	// in a row that were never acknowledged count as a lost connection:
	// a stateless server has no connection whose end would say it is
	// gone. Defaults 1 s and 8.
	ListenDelay    Duration `json:"listenDelay,omitempty"`
	ListenFailures int      `json:"listenFailures,omitempty"`
}

// probesOff reports whether liveness probes are off.
func (p ReconnectPolicy) probesOff() bool { return p.ProbeAfter < 0 }

// The policy's defaults.
var defaultPolicy = ReconnectPolicy{
	Strikes:      3,
	MaxAttempts:  6,
	InitialDelay: Duration(500 * time.Millisecond),
	Multiplier:   2,
	MaxDelay:     Duration(30 * time.Second),
	Jitter:       0.3,
	StableAfter:  Duration(time.Minute),
	ProbeAfter:   Duration(15 * time.Second),
	ProbeTimeout: Duration(10 * time.Second),

	ListenDelay:    Duration(time.Second),
	ListenFailures: 8,
}

// over returns p with its zero fields taken from base.
func (p ReconnectPolicy) over(base ReconnectPolicy) ReconnectPolicy {
	if p.Strikes <= 0 {
		p.Strikes = base.Strikes
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = base.MaxAttempts
	}
	if p.InitialDelay <= 0 {
		p.InitialDelay = base.InitialDelay
	}
	if p.Multiplier <= 0 {
		p.Multiplier = base.Multiplier
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = base.MaxDelay
	}
	if p.Jitter == 0 {
		p.Jitter = base.Jitter
	}
	if p.StableAfter <= 0 {
		p.StableAfter = base.StableAfter
	}
	if p.ProbeAfter == 0 {
		p.ProbeAfter = base.ProbeAfter
	}
	if p.ProbeTimeout <= 0 {
		p.ProbeTimeout = base.ProbeTimeout
	}
	if p.ListenDelay <= 0 {
		p.ListenDelay = base.ListenDelay
	}
	if p.ListenFailures <= 0 {
		p.ListenFailures = base.ListenFailures
	}
	return p
}

// Validate reports a policy field out of range.
func (p ReconnectPolicy) Validate() error {
	switch {
	case p.Strikes < 0, p.InitialDelay < 0, p.MaxDelay < 0, p.StableAfter < 0, p.ProbeTimeout < 0,
		p.ListenDelay < 0, p.ListenFailures < 0:
		return fmt.Errorf("reconnect: counts and durations must not be negative (but probeAfter, negative to turn probes off)")
	case p.Multiplier != 0 && p.Multiplier < 1:
		return fmt.Errorf("reconnect: multiplier must be at least 1")
	case p.Jitter >= 1:
		return fmt.Errorf("reconnect: jitter must be below 1")
	}
	return nil
}

// newBackoff returns the policy's backoff, reset.
func (p ReconnectPolicy) newBackoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = time.Duration(p.InitialDelay)
	b.Multiplier = p.Multiplier
	b.MaxInterval = time.Duration(p.MaxDelay)
	b.RandomizationFactor = max(p.Jitter, 0)
	b.MaxElapsedTime = 0 // MaxAttempts bounds an episode
	b.Reset()
	return b
}

// Duration is a time.Duration that reads from JSON either as a Go
// duration string ("500ms", "2m") or as a number of milliseconds, and is
// written as a string.
type Duration time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	ms, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("duration %s: want a string such as \"2s\" or milliseconds", b)
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

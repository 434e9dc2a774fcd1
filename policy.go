package mcpvisor

import (
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
)

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

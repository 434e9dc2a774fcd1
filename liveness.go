package mcpvisor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/rs/zerolog"
)

// Noticing a server that stopped answering (see ReconnectPolicy.ProbeAfter).
//
// One goroutine per Supervisor (the liveness watcher) looks at every ready
// server's session a few times per ProbeAfter. It costs an idle server
// nothing but that look: no timer, no goroutine, no request.
//
// A busy server is not a hung one. While calls are in flight the server
// is at work, and a server that handles one request at a time cannot
// answer a ping meanwhile: it is never probed then, whatever its silence;
// each call is bounded by its own deadline (and a progress report, which
// is a frame, shows it alive anyway). A server becomes suspect when it
// owes nothing (no call in flight), a call was given up since the last
// frame it sent (its deadline passed, or its caller cancelled it), it has
// sent no frame at all for ProbeAfter, and it is not waiting for the host
// to answer one of its own requests. A suspect gets a ping probe (one at
// a time); a probe that is answered, or during which anything arrives,
// clears the suspicion; one that times out with nothing received is a
// strike, counted with the connection's other strikes (Strikes in a row
// close it: struckOut), and the next probe follows at once while the
// silence lasts and nothing else is in flight.

// ErrUnresponsive: the server owed an answer, sent nothing for a while,
// and did not answer a ping probe either. It is the error of the strike
// (and, at the last strike, of the calls failed by the reconnect).
var ErrUnresponsive = errors.New("mcpvisor: server stopped answering")

// liveness watch bounds: the watcher looks at least every second, at
// most every 10 ms.
const (
	maxLivenessTick = time.Second
	minLivenessTick = 10 * time.Millisecond
)

// livenessTick is how often the watcher looks: a quarter of the shortest
// ProbeAfter it knows of (the supervisor's default), within the bounds.
// A server whose own ProbeAfter is shorter is looked at no more often.
func livenessTick(p ReconnectPolicy) time.Duration {
	if p.probesOff() {
		return maxLivenessTick
	}
	return min(max(time.Duration(p.ProbeAfter)/4, minLivenessTick), maxLivenessTick)
}

// watched is what the watcher remembers of one server's session.
type watched struct {
	sess        *session.Session
	frames      uint64    // Liveness.Frames when last seen to change
	abandoned   uint64    // Liveness.Abandoned when frames last changed
	silentSince time.Time // the first look since frames last changed
	probing     bool      // a probe is in flight
}

// probeResult is a finished probe, for the watcher.
type probeResult struct {
	h        *serverHandle
	view     *serverView // the view the probe was started from
	err      error       // the ping's
	silent   bool        // no frame arrived during the probe
	duration time.Duration
	// silentFor is how long the server had owed an answer, with nothing
	// received, when the probe ended.
	silentFor time.Duration
}

// livenessWatcher is a Supervisor's liveness watcher: one goroutine
// (run) that looks at the published handles, with the state it keeps of
// each server's session local to it.
//
// Concurrency: the fields are set before run starts and not written
// after; probes counts the probe goroutines run starts, and done closes
// when run has returned (Close waits for both).
type livenessWatcher struct {
	handles *atomic.Pointer[[]*serverHandle] // the registry's published handles
	closed  <-chan struct{}                  // the Supervisor's: run returns when it closes
	root    *actor.RootContext               // to strike a server's actor
	log     zerolog.Logger
	probes  sync.WaitGroup
	done    chan struct{}
}

// run runs the liveness watcher, looking every tick, until closed.
func (lw *livenessWatcher) run(tick time.Duration) {
	defer close(lw.done)
	probes := &lw.probes
	t := time.NewTicker(tick)
	defer t.Stop()
	results := make(chan probeResult)
	state := map[*serverHandle]*watched{}
	for {
		select {
		case <-lw.closed:
			return
		case r := <-results:
			if w := state[r.h]; w != nil && w.sess == r.view.sess {
				w.probing = false
			}
			lw.probed(r)
		case now := <-t.C:
			hs := *lw.handles.Load()
			seen := make(map[*serverHandle]bool, len(hs))
			for _, h := range hs {
				seen[h] = true
				v := h.view.Load()
				if v.state != StateReady || v.sess == nil || v.probeAfter < 0 {
					delete(state, h)
					continue
				}
				w := state[h]
				if w == nil || w.sess != v.sess {
					l := v.sess.Liveness()
					w = &watched{sess: v.sess, frames: l.Frames, abandoned: l.Abandoned, silentSince: now}
					state[h] = w
				}
				if w.suspect(now, v.probeAfter) {
					w.probing = true
					probes.Add(1)
					since := w.silentSince
					go func() {
						defer probes.Done()
						r := probe(h, v)
						r.silentFor = time.Since(since)
						select {
						case results <- r:
						case <-lw.closed:
						}
					}()
				}
			}
			for h := range state {
				if !seen[h] {
					delete(state, h)
				}
			}
		}
	}
}

// suspect updates w with a look at its session at now, and reports
// whether a probe is due: the server owes nothing, a call was given up
// since its last frame, it has sent nothing for probeAfter, and no probe
// is in flight. A call in flight (the probe's own ping aside) is work
// under way, bounded by its own deadline: no probe meanwhile.
func (w *watched) suspect(now time.Time, probeAfter time.Duration) bool {
	l := w.sess.Liveness()
	if l.Frames != w.frames {
		w.frames, w.abandoned, w.silentSince = l.Frames, l.Abandoned, now
		return false
	}
	if w.probing || l.Owed > 0 || l.Serving > 0 || l.Abandoned == w.abandoned {
		return false
	}
	return now.Sub(w.silentSince) >= probeAfter
}

// probe pings the server of view v once, bounded by its probe timeout.
func probe(h *serverHandle, v *serverView) probeResult {
	before := v.sess.Liveness().Frames
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), v.probeTimeout)
	err := v.sess.Ping(ctx)
	cancel()
	return probeResult{h: h, view: v, err: err, silent: v.sess.Liveness().Frames == before, duration: time.Since(start)}
}

// probed acts on a finished probe: an answer or a frame clears the
// strikes, silence is a strike.
func (lw *livenessWatcher) probed(r probeResult) {
	h, v := r.h, r.view
	if v.sess.Err() != nil || h.view.Load().sess != v.sess {
		return // the session ended meanwhile; the actor knows
	}
	var rpcErr *protocol.Error
	if r.err == nil || errors.As(r.err, &rpcErr) || !r.silent {
		// Alive: it answered (even with an error), or sent something.
		if h.strikes.Load() != 0 {
			h.strikes.Store(0)
		}
		lw.log.Debug().Str("server", h.name).Dur("probe", r.duration).Msg("liveness probe answered")
		return
	}
	err := fmt.Errorf("%w: it has owed an answer and sent nothing for %v, and a ping got no answer within %v (%v)",
		ErrUnresponsive, r.silentFor.Round(time.Millisecond), v.probeTimeout, r.err)
	n := h.strikes.Load() + 1
	lw.log.Warn().Str("server", h.name).Int32("strike", n).Int("of", v.strikeLimit).Err(err).Msg("server unresponsive")
	h.strike(lw.root, v.gen, v.strikeLimit, err)
}

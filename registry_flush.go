package mcpvisor

import (
	"reflect"
	"time"
)

// queueState queues a server's state event for the next flush, after the
// pool that goes with the state.
func (r *registry) queueState(v *serverView, prev State, err error) {
	ev := eventRecord{Type: EventServerState, Server: v.name, State: v.state, Previous: prev}
	if err != nil {
		ev.Err = err.Error()
		ev.Failure = ClassifyFailure(err)
	}
	r.pending = append(r.pending, ev)
	r.scheduleFlush()
}

// markPoolDirty asks for a pool rebuild at the next flush.
func (r *registry) markPoolDirty() {
	r.poolDirty = true
	r.scheduleFlush()
}

// Pool rebuilds are spaced so that they take at most a 33rd of the
// registry's time: a change within flushSpacing of the last flush waits
// for the rest of it, together with every change that follows. Rebuilding
// and diffing are O(pool) in time and in garbage (the update path copies
// the pool's indexes), so in a storm (a thousand servers connecting) this
// keeps the cost per change bounded, while a small pool, which rebuilds
// in microseconds, is hardly delayed. (A thousand servers of five tools
// update in about 0.6 ms and 0.7 MB of garbage: their pool is at most
// 20 ms late while they connect, and the first change after a quiet spell
// is flushed at once.) The share matters on a small machine, where the
// registry competes for the CPU with the servers it is starting: at 8 (a
// ninth) the flushes of a 1,000-server connect were a fifth of the
// client's CPU and more than half its allocations.
//
// While a connect wave runs (servers connecting or waiting for a slot),
// flushes are at least waveFlushSpacing apart, and the wave's last settle
// flushes at once (endOfWave). The share of the registry's time is the
// wrong measure then: the registry is mostly idle, waiting for servers to
// start and answer, so a thirty-third of its time was still a fifth of
// the CPU of a 1,000-server connect, and more than a quarter of a
// 10,000-server one (bench/results/2026-11-25-scale): the rebuild is
// O(pool), and a wave rebuilt it a few hundred times. A tool of a server
// that became ready during a wave reaches the pool at most
// waveFlushSpacing later; the pool is whole when the wave ends.
const (
	flushCostShare   = 32 // spacing = flushCostShare × the last rebuild and diff
	maxFlushSpacing  = 50 * time.Millisecond
	waveFlushSpacing = 100 * time.Millisecond
)

func (r *registry) flushSpacing() time.Duration {
	d := min(flushCostShare*r.lastBuild, maxFlushSpacing)
	if r.inWave() {
		d = max(d, waveFlushSpacing)
	}
	return d
}

// inWave reports whether servers are connecting or waiting for a connect
// slot.
func (r *registry) inWave() bool {
	st := r.admission.stats()
	for c := range st.Running {
		if st.Running[c] > 0 || st.Queued[c] > 0 {
			return true
		}
	}
	return false
}

// endOfWave flushes at once a flush that waits for its spacing, when no
// server is connecting or waiting any more: the pool (and WaitSettled)
// need not wait for the spacing of a wave that is over.
func (r *registry) endOfWave() {
	if r.flushTimer != nil && !r.inWave() {
		r.flush()
	}
}

func (r *registry) scheduleFlush() {
	if r.flushQueued || r.closed {
		return
	}
	r.flushQueued = true
	root, self := r.root, r.self
	if wait := r.flushSpacing() - time.Since(r.lastFlush); wait > 0 {
		r.flushTimer = time.AfterFunc(wait, func() { root.Send(self, flushPool{}) })
		return
	}
	root.Send(self, flushPool{})
}

// flush rebuilds the pool if it is dirty, stores it, and then publishes
// the queued events followed by the pool's diff and collision events.
func (r *registry) flush() {
	r.flushQueued = false
	if r.flushTimer != nil {
		r.flushTimer.Stop() // flushing early (at close): the timer's flush would be empty
		r.flushTimer = nil
	}
	if r.closed {
		return
	}
	r.lastFlush = time.Now()
	var diffs []eventRecord
	if r.poolDirty {
		r.poolDirty = false
		old := r.out.pool.Load()
		began := time.Now()
		p, evs := r.nextPool(old)
		r.out.pool.Store(p)
		r.out.poolChanged.notify()
		diffs = evs
		r.lastBuild = time.Since(began)
	}
	pending := r.pending
	r.pending = nil
	for _, ev := range pending {
		r.publish(ev)
	}
	for _, ev := range diffs {
		if ev.Type == EventCollision {
			c := ev.Collision
			r.log.Warn().Str("kind", c.Kind).Str("name", c.Name).Str("holder", c.Holder).
				Str("renamed", c.Server+"/"+c.Original+" → "+c.Renamed).Msg("name collision")
		}
		r.publish(ev)
	}
	r.checkSettled()
}

// nextPool builds the pool of the configured servers from the current
// one, old, and the events saying what changed.
func (r *registry) nextPool(old *pool) (*pool, []eventRecord) {
	servers := make([]poolServer, 0, len(r.servers))
	for name, e := range r.servers {
		servers = append(servers, poolServer{name: name, h: e.h, off: e.off})
	}
	return nextPool(servers, r.opts.Builtins, r.opts.MaxDescriptionLength, old)
}

// publish puts an event on the bus.
func (r *registry) publish(ev eventRecord) {
	r.bus.publish(ev)
	r.scheduleGapFlush(r.bus.hasDrops())
}

// gapFlushInterval is how often the registry retries telling a slow
// subscriber how many events it lost, so that it learns even when no
// further event comes.
const gapFlushInterval = 100 * time.Millisecond

func (r *registry) scheduleGapFlush(needed bool) {
	if !needed || r.gapTimer != nil || r.closing {
		return
	}
	root, self := r.root, r.self
	r.gapTimer = time.AfterFunc(gapFlushInterval, func() { root.Send(self, flushGaps{}) })
}

// flushGaps asks the registry to retry pending gap markers.
type flushGaps struct{}

// poolChanged reports whether the difference between two views of a
// server changes the pool.
func poolChanged(prev, v *serverView) bool {
	if prev == nil {
		return v.offersTools()
	}
	if prev.offersTools() != v.offersTools() {
		return true
	}
	if v.offersTools() && !sameLists(prev.lists, v.lists) {
		return true
	}
	// The config parts the pool applies (a tool filter, trust) changed.
	return v.offersTools() && (!reflect.DeepEqual(prev.cfg.Tools, v.cfg.Tools) || prev.cfg.Trust != v.cfg.Trust)
}

func sameLists(a, b lists) bool {
	return sameSlice(a.tools, b.tools) && sameSlice(a.prompts, b.prompts) &&
		sameSlice(a.resources, b.resources) && sameSlice(a.templates, b.templates) && a.pins == b.pins
}

// hiddenChanged reports whether the server's entry among the tools that
// are routed but not offered (pool.hiddenTools) changed.
func hiddenChanged(prev, v *serverView) bool {
	if prev == nil {
		return v.routesHiddenTools()
	}
	return prev.routesHiddenTools() != v.routesHiddenTools() ||
		(v.routesHiddenTools() && (!sameSlice(prev.lists.tools, v.lists.tools) || prev.lists.pins != v.lists.pins))
}

func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

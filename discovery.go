package mcpvisor

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/mcpvisor/mcpvisor/protocol"
)

// The discovery cache (Options.DiscoveryCache): the tools a lazy server
// listed at its last connect, kept across runs, so that its tools are in
// the pool before its first use. The server actor loads its entry when it
// starts (or its config changes) and the server is lazy and not
// connected; the tools go through the tool pins like listed ones; the
// first call wakes the server as any call to a lazy server does; the
// connect replaces the cached tools with the listed ones, and the pool's
// diff (EventToolsChanged) says what differed. Every listing of a lazy
// server (connect, list_changed) is stored back.

// ConfigHash identifies what runs under a server's name, for the
// discovery cache: a hash of the members of its config that reach the
// server (transport, command, arguments, environment, directory, URL,
// headers, TLS, OAuth, protocol version), not of the ones that only say
// how the supervisor uses it (trust, tools filter, timeouts, laziness,
// reconnect policy, pings, disabled, the cluster placement Nodes). A
// hash, so that secrets in the environment or headers are not written
// down.
func ConfigHash(cfg ServerConfig) string {
	cfg.Trust, cfg.Tools, cfg.TimeoutMs, cfg.ConnectTimeoutMs, cfg.Lazy = "", ToolFilter{}, 0, 0, false
	cfg.Reconnect, cfg.PingInterval, cfg.Disabled, cfg.NeedsApproval, cfg.Nodes = ReconnectPolicy{}, 0, false, "", nil
	b, err := json.Marshal(cfg) // map keys sorted: deterministic
	if err != nil {             // cannot happen: the config is plain data
		b = []byte(cfg.Command + "\x00" + cfg.URL)
	}
	sum := sha256.Sum256(append([]byte(cfg.Kind()+"\x00"), b...))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// cacheLoaded carries a discovery cache entry (ok) or its absence to the
// server actor.
type cacheLoaded struct {
	gen, seq uint64
	ok       bool
	tools    []protocol.Tool
	pins     *toolPins
	pinErr   error
	savedAt  time.Time
}

// cachedTools has one job: offering a server's tools before a listing
// of its own in this run. For a lazy server they are the discovery
// cache's entry (loaded when the server starts or its config changes,
// and stored back at every listing); for a per-user server whose one
// connection needs authorization, those a principal's session listed
// (see userListed). A connect's listing replaces them.
//
// Concurrency: owned by the server actor's goroutine, like the actor it
// is part of (a), whose lists it sets; the cache is read and written in
// goroutines that only send messages.
type cachedTools struct {
	a *serverActor // the actor whose tools it offers

	// cached is set while the tools come from the discovery cache (or a
	// principal's listing), not from a listing of this run; loading
	// while the entry is read, numbered by seq.
	cached  bool
	loading bool
	seq     uint64
}

// load reads the server's discovery cache entry, in a goroutine,
// when the server is lazy, startable and not connected. It marks the load
// (loading) without publishing: the caller publishes next, so that
// the registry never sees the server's new state without the load in
// progress and calls it settled too early (WaitSettled).
func (c *cachedTools) load() {
	a := c.a
	cache := a.opts.DiscoveryCache
	if cache == nil || !a.cfg.Lazy || !a.cfg.startable() || a.sess != nil || a.cancelConnect != nil || a.stopping {
		return
	}
	c.seq++
	c.loading = true // not settled until the entry is in (WaitSettled)
	gen, seq, cfg, name, self, root, log := a.gen, c.seq, a.cfg, a.h.name, a.self, a.root, a.log
	pinStore := a.opts.ToolPins.Store
	a.goroutines.start("server.cache-load", func() {
		tools, savedAt, ok, err := cache.Load(name, ConfigHash(cfg))
		if err != nil {
			log.Warn().Err(err).Msg("the discovery cache entry cannot be read; the tools are known at the first use")
		}
		m := cacheLoaded{gen: gen, seq: seq, ok: ok, tools: tools, savedAt: savedAt}
		if ok {
			m.pins, m.pinErr = checkPins(pinStore, name, cfg, tools)
		}
		root.Send(self, m)
	})
}

// arrived offers the cached tools of a server still pending for its
// first use.
func (c *cachedTools) arrived(m cacheLoaded) {
	a := c.a
	if m.seq != c.seq {
		return // a load for an earlier config
	}
	if c.loading {
		c.loading = false
		defer a.publish()
	}
	if !m.ok || m.gen != a.gen || a.state != StatePending || a.sess != nil || a.cancelConnect != nil || a.stopping || len(a.lists.tools) > 0 {
		return // none, or connected (or connecting) meanwhile: the listing wins
	}
	a.lists.tools, a.lists.pins = m.tools, m.pins
	c.cached = true
	a.log.Info().Int("tools", len(m.tools)).Time("saved", m.savedAt).Msg("tools offered from the discovery cache until the first use")
	a.pinReports.found(m.pinErr)
}

// store writes the tools a lazy server listed to the discovery
// cache, in a goroutine.
func (c *cachedTools) store(tools []protocol.Tool) {
	a := c.a
	cache := a.opts.DiscoveryCache
	if cache == nil || !a.cfg.Lazy {
		return
	}
	cfg, name, log := a.cfg, a.h.name, a.log
	a.goroutines.start("server.cache-store", func() {
		if err := cache.Store(name, ConfigHash(cfg), tools); err != nil {
			log.Warn().Err(err).Msg("the discovery cache cannot be written")
		}
	})
}

// userListed offers the tools a principal's session listed, while the
// server has none of its own (see userListed).
func (c *cachedTools) userListed(m userListed) {
	a := c.a
	if a.state != StateNeedsAuth || a.sess != nil || a.cancelConnect != nil || a.stopping || len(a.lists.tools) > 0 {
		return
	}
	a.lists.tools, a.lists.pins = m.tools, m.pins
	c.cached = true
	a.log.Info().Int("tools", len(m.tools)).Msg("tools offered as a principal's session listed them, until the server's own connection is authorized")
	a.pinReports.found(m.pinErr)
	a.publish()
}

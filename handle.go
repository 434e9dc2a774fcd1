package mcpvisor

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/transports"
)

// serverHandle is how the registry and callers reach one server. It
// outlives the server actor's instances (a restarted actor is a new
// instance on the same handle), so whatever must survive a restart lives
// here.
//
// Concurrency: the handle is shared by the registry, the server actor
// (every instance), the goroutines the actor starts, and callers (any
// goroutine). Each field has one writer, named on the field; the groups
// are: identity, written once by the registry before the handle is
// published (publishHandles) and read-only after; the published view,
// written by the server actor (and by the registry only once the actor
// is gone, see registry.stopped and registry.terminated); the actor's
// bookkeeping of its own goroutines; and the traffic counters, written
// by whichever goroutine used the connection. Everything mutable is an
// atomic or guarded by its own lock.
type serverHandle struct {
	// Identity: written by the registry when it spawns the actor.
	name string
	pid  *actor.PID

	// The published state. view is written by the server actor on every
	// change (serverActor.publish), and by the registry for an actor that
	// stopped; changed fires after each such write. Readers take a
	// snapshot: a view is immutable once stored.
	view    atomic.Pointer[serverView]
	changed changeSignal

	// The actor's bookkeeping, written by the server actor (any instance)
	// and, where said, by its goroutines.
	gens     atomic.Uint64 // connection generations ever started; never reused
	admitted atomic.Uint64 // the ticket of the last connectNow received
	// busy counts the goroutines the actor started that have not yet
	// reported goroutineDone. Incremented when one starts, decremented when
	// its goroutineDone (or the last connectResult that stands for it) is
	// received, so the actor never stops while one of
	// them may still send it a message (or own a process).
	busy atomic.Int32
	// running counts the same goroutines, but each decrements it itself
	// when it ends: the registry waits on it for an actor that supervision
	// stopped, which will never receive another goroutineDone.
	running sync.WaitGroup
	// stopped is set by the actor (any instance) when it has stopped for
	// good, so that its goroutines do not message a dead mailbox.
	stopped atomic.Bool

	// Traffic counters: written by whichever goroutine used the
	// connection (callers, the pinger, the liveness watcher) and reset by
	// the actor for each new connection.
	//
	// strikes counts the consecutive transient errors of the live
	// connection, from calls and pings (see recordOutcome).
	strikes atomic.Int32
	// latency counts the requests sent on the server's sessions
	// (onSession); any goroutine observes it.
	latency latencyHist
	// memory is what the server's sessions remember across connections
	// (session.Memory, which has its own lock); the actor forgets it when
	// the server's address changes.
	memory session.Memory
	// auth is the server's OAuth token source (auth.go), guarded by its
	// own mutex: built by the actor, used by connects and by Login.
	auth authHolder
	// users are the principals' own sessions of a server whose
	// credentials are per user (usersessions.go), with their own lock.
	users userSessions
	// sseOnly is set by a connect goroutine when a url-only server was
	// found to speak only HTTP+SSE (fallback.go), so that its reconnects
	// go straight to it; the actor clears it when the address changes.
	sseOnly atomic.Bool
	// logLevel is the log level the host asked for (SetLogLevel), for
	// every connection from then on; nil until it asks.
	logLevel atomic.Pointer[protocol.LoggingLevel]
}

// changeSignal lets goroutines wait for the next change of something. The
// zero value is ready; it allocates only while someone waits.
//
// Concurrency: safe for concurrent use; ch is guarded by mu.
type changeSignal struct {
	mu sync.Mutex
	ch chan struct{} // guarded by mu; closed and cleared by notify
}

// next returns a channel closed at the next notify.
func (c *changeSignal) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

func (c *changeSignal) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// serverView is an immutable snapshot of one server, published by its
// actor on every change. Callers read it without a mailbox hop.
//
// Concurrency: immutable once stored in serverHandle.view; whoever
// changes a server copies its view and stores the copy. (What the pool
// derives from a view, its offer, lives in the pool: pool.views.)
type serverView struct {
	name            string
	cfg             ServerConfig
	sseOnly         bool // a url-only server found to speak only HTTP+SSE (fallback.go)
	state           State
	since           time.Time
	admitted        uint64           // ticket of the connect this view answers
	gen             uint64           // generation of the current connect attempt or session
	sess            *session.Session // non-nil exactly when state is ready
	lists           lists            // what the server offered when last connected
	err             error
	failure         FailureKind // ClassifyFailure(err)
	connectedSince  time.Time
	protocolVersion string
	serverInfo      protocol.Implementation
	// recovering is set while the server reconnects after it was ready:
	// its tools stay offered and calls wait for the new connection.
	recovering  bool
	attempt     int         // connect attempts in the current episode
	nextRetry   time.Time   // when the scheduled attempt starts, while reconnecting
	strikeLimit int         // ReconnectPolicy.Strikes of this server
	auth        *authHolder // the server's token source (read at status time)
	// pinOpts are the Supervisor's pin options (shared, read-only): with
	// lists.pins and cfg.Trust, they decide which tools are withheld.
	pinOpts *PinOptions
	// probeAfter and probeTimeout are the server's liveness probe
	// settings (ReconnectPolicy; probeAfter < 0: no probes).
	probeAfter, probeTimeout time.Duration
	// cached is set while lists.tools come from the discovery cache: the
	// lazy server has not connected in this run yet; loadingCache while
	// its entry is being read (the server is not settled).
	cached, loadingCache bool
	// listErrors are the lists the server refused on the live
	// connection (server_lists.go).
	listErrors []ListError
}

// offersTools reports whether the server's tools belong in the pool: when
// it is ready, and while it recovers from a lost connection or an expired
// session.
func (v *serverView) offersTools() bool {
	switch v.state {
	case StateReady:
		return true
	case StatePending, StateConnecting, StateReconnecting:
		return v.recovering || v.cached
	case StateNeedsAuth:
		// A per-user server offers the tools a principal's session
		// listed (usersessions.go).
		return v.cached && v.cfg.credentials() != CredentialsShared
	}
	return false
}

// routesHiddenTools reports whether calls to the tools the server listed
// when last connected still reach it although they are not offered (see
// pool.hiddenTools).
func (v *serverView) routesHiddenTools() bool {
	return !v.offersTools() && len(v.lists.tools) > 0 && v.state != StateDisabled && v.state != StateStopped && v.state != StateNeedsApproval
}

// renewing reports whether the server is replacing a session the server
// expired, which is quick and not a failure.
func (v *serverView) renewing() bool {
	return v.recovering && v.failure == FailureSessionExpired && (v.state == StatePending || v.state == StateConnecting)
}

// status renders the view for hosts.
func (v *serverView) status() ServerStatus {
	st := ServerStatus{
		Name:            v.name,
		State:           v.state,
		Status:          StatusOf(v.state, false),
		Scope:           v.cfg.Scope,
		Config:          redact(v.cfg),
		Transport:       string(effectiveTransport(v.cfg, v.sseOnly)),
		ProtocolVersion: v.protocolVersion,
		ServerInfo:      v.serverInfo,
		ToolCount:       len(v.lists.tools),
		Resources:       len(v.lists.resources),
		Prompts:         len(v.lists.prompts),
		ConnectedSince:  v.connectedSince,
		StateSince:      v.since,
		Lazy:            v.cfg.Lazy,
		CachedTools:     v.cached,
		Attempt:         v.attempt,
		NextRetry:       v.nextRetry,
	}
	if v.err != nil {
		st.LastError = v.err.Error()
		if v.state != StateReady { // a ready server keeps its last error for the record
			st.Error = st.LastError
		}
		st.LastErrorClass = transports.Classify(v.err).String()
		st.LastFailure = v.failure
	}
	if v.sess != nil {
		st.InFlight = v.sess.InFlight()
		if v.state == StateReady {
			hints := v.sess.Lists().Hints()
			caps := v.sess.Peer().Capabilities
			st.Cache, st.Capabilities = &hints, &caps
		}
		if c, ok := v.sess.Conn().(interface {
			Sandbox() transports.SandboxMechanism
		}); ok {
			st.Sandbox = c.Sandbox()
		}
	}
	if v.auth != nil {
		st.Auth = v.auth.status()
	}
	st.WithheldTools = v.withheldTools()
	st.ListErrors = v.listErrors
	return st
}

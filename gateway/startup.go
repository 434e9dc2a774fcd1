package gateway

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Start-up: agent hosts list the tools once, right after they connect,
// and a host that starts the gateway itself (`supervise --stdio`) or
// connects the moment its port answers asks while the servers are still
// starting (an npx or uvx cold start takes seconds). So the list requests
// made during start-up wait until the servers configured at start have
// settled (ready, failed, needs-auth, needs-approval, disabled; lazy
// servers, offered from the discovery cache, hold nothing) or
// Options.StartupWait has passed, whichever comes first, and then answer
// with the pool as it is. Servers that arrive later reach the clients by
// list_changed as always. Calls need no gate: the Supervisor waits for the
// server behind a pool name that has not listed yet (actors.System.route),
// and notYetListed gives it the pool name of a downstream name the index
// cannot know yet.

// DefaultStartupWait is a sane Options.StartupWait: long enough for the
// cold start of a server run by npx or uvx (a package download), short
// enough for a client's first request timeout (the SDKs' is 60 s).
const DefaultStartupWait = 30 * time.Second

// Settler is implemented by a Backend that can wait until its servers
// have settled (*mcpvisor.Supervisor's WaitSettled): every server ready,
// failed, needs-auth, needs-approval or disabled, lazy ones excepted,
// and the pool up to date with them. It returns nil then, or ctx's error.
// Without it, list requests never wait (see ServersConfigured).
type Settler interface {
	WaitSettled(ctx context.Context) error
}

// startupGate is the start-up gate: done closes once, when the servers
// have settled, the window has passed or the gateway drains.
type startupGate struct {
	done chan struct{}
	once sync.Once
}

// open lets every waiting list through; calling it again does nothing.
func (sg *startupGate) open() { sg.once.Do(func() { close(sg.done) }) }

// startupWait is the gateway's start-up wait: the gate the list requests
// wait at, from ServersConfigured until the servers have settled.
//
// Concurrency: safe for concurrent use; gate is set once (atomically),
// and opened once, by the goroutine ServersConfigured starts or by Drain.
type startupWait struct {
	b      Backend
	opts   Options
	log    zerolog.Logger
	naming *namer
	closed <-chan struct{} // the gateway's: closed by Close
	gate   atomic.Pointer[startupGate]
}

// ServersConfigured tells the gateway that the servers configured at
// start have been handed to the Backend. From then on, until they have
// settled (Settler) or Options.StartupWait has passed, tools/list,
// prompts/list, resources/list and resources/templates/list wait for
// them (each also bounded by its own request's context, and by Drain and
// Close), so that a client that lists once, as soon as it connects, sees
// the whole pool. It does nothing when StartupWait is zero or negative or
// the Backend is no Settler. Call it once, before serving; it returns at
// once (the wait runs in a goroutine of its own that ends with the
// window, Drain or Close).
func (g *Gateway) ServersConfigured() { g.startup.configured() }

// configured starts the wait (Gateway.ServersConfigured).
func (sw *startupWait) configured() {
	s, ok := sw.b.(Settler)
	if !ok || sw.opts.StartupWait <= 0 {
		return
	}
	gate := &startupGate{done: make(chan struct{})}
	if !sw.gate.CompareAndSwap(nil, gate) {
		return // called before
	}
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), sw.opts.StartupWait)
		defer cancel()
		go func() {
			select {
			case <-sw.closed:
			case <-gate.done: // drained
			case <-ctx.Done():
			}
			cancel()
		}()
		err := s.WaitSettled(ctx)
		// The pool is the settled one now: names are indexed anew from
		// it (Run clears the index too, once it has read the events).
		sw.naming.reset()
		gate.open()
		took := time.Since(start).Round(time.Millisecond)
		if err != nil {
			sw.log.Warn().Stringer("after", took).Stringer("window", sw.opts.StartupWait).
				Msg("start-up window over with servers still starting: lists answer without them, and they join by list_changed")
			return
		}
		sw.log.Info().Stringer("after", took).Msg("the servers configured at start have settled")
	}()
}

// await waits, while the start-up gate is up (ServersConfigured),
// until it opens, ctx ends or the gateway closes. It reports whether it
// waited at all.
func (sw *startupWait) await(ctx context.Context) bool {
	gate := sw.gate.Load()
	if gate == nil {
		return false
	}
	select {
	case <-gate.done:
		return false
	default:
	}
	select {
	case <-gate.done:
	case <-ctx.Done():
	case <-sw.closed:
	}
	return true
}

// open opens the start-up gate, if any (Drain: a list waiting for
// the servers answers now rather than hold the shutdown up).
func (sw *startupWait) open() {
	if gate := sw.gate.Load(); gate != nil {
		gate.open()
	}
}

// notYetListed returns the pool name to call for downstream name, which
// the name index does not know (qualified is what qualifiedTool made of
// it): maybe a tool of a server that has not listed yet. A short name
// (NamesShort, <server>__<tool>) of a configured server is that pool name
// without its mcp__: the Supervisor waits for the server behind it. Any
// other unknown name (a bare or a cut one) is looked up again once the
// start-up gate has opened, if it was up. Otherwise qualified is
// returned, and the Supervisor says "unknown tool" at once.
func (sw *startupWait) notYetListed(ctx context.Context, name, qualified string) string {
	if sw.opts.Names == NamesShort || sw.opts.Names == "" {
		if !strings.HasPrefix(name, "mcp__") {
			for _, st := range sw.b.Status() {
				if strings.HasPrefix(name, nameChars(st.Name)+"__") {
					return "mcp__" + name
				}
			}
		}
	}
	if sw.await(ctx) {
		return sw.naming.qualifiedTool(name)
	}
	return qualified
}

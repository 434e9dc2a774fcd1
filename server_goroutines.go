package mcpvisor

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/internal/routine"
	"github.com/mcpvisor/mcpvisor/internal/session"
)

// serverGoroutines has one job: starting the server actor's goroutines
// and counting them on the handle (serverHandle.busy and running), so
// that the actor never stops while one of them may still send it a
// message or own a process. Every goroutine of the server actor starts
// here (routine.Run, with the server's name as the label "server").
//
// Concurrency: owned by the actor's goroutine, which alone starts
// goroutines, and sets self and root when the actor starts; each
// goroutine gets copies of them.
type serverGoroutines struct {
	h        *serverHandle
	dispatch *actors.Dispatcher // the Supervisor's; read-only
	self     *actor.PID
	root     *actor.RootContext // for goroutines to message the actor
}

// start runs f in a goroutine named name that reports goroutineDone
// when it ends; see serverHandle.busy.
func (g *serverGoroutines) start(name string, f func()) {
	g.h.busy.Add(1)
	g.h.running.Add(1)
	h, self, root := g.h, g.self, g.root
	g.dispatch.Go(func() {
		routine.Run(name, f, "server", h.name)
		h.running.Done()
		if !h.stopped.Load() {
			root.Send(self, goroutineDone{})
		}
	})
}

// startEndingWith is start for a connect attempt: its result, sent once
// f has returned, is the goroutine's last message and stands for its
// goroutineDone (one message to the actor instead of two for every
// connect). A result that finds the actor stopped for good (by
// supervision) closes its session: nobody will take it.
func (g *serverGoroutines) startEndingWith(name string, f func() connectResult) {
	g.h.busy.Add(1)
	g.h.running.Add(1)
	h, self, root := g.h, g.self, g.root
	g.dispatch.Go(func() {
		var res connectResult
		routine.Run(name, func() { res = f() }, "server", h.name)
		res.last = true
		if h.stopped.Load() {
			if res.sess != nil {
				closeSession(res.sess, session.ErrConnectionClosed)
			}
		} else {
			root.Send(self, res)
		}
		h.running.Done()
	})
}

// startAfter is start for f, started once ctx is done: it counts as
// running from now, but nothing runs, or waits, until then.
func (g *serverGoroutines) startAfter(ctx context.Context, name string, f func()) {
	g.h.busy.Add(1)
	g.h.running.Add(1)
	h, self, root := g.h, g.self, g.root
	context.AfterFunc(ctx, func() {
		routine.Run(name, f, "server", h.name)
		h.running.Done()
		if !h.stopped.Load() {
			root.Send(self, goroutineDone{})
		}
	})
}

// closeInBackground fails the session's pending calls now and runs the
// transport's shutdown ladder in a goroutine.
func (g *serverGoroutines) closeInBackground(sess *session.Session, cause error) {
	g.start("server.close-session", func() { closeSession(sess, cause) })
}

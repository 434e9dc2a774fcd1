package main

import (
	"context"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/gateway/dashboard"
)

// What supervise does the same in single-node and cluster mode: the
// signals it waits for, the event log, the gateway's options and the
// goroutines that serve it.

// shutdownSignals starts relaying the signals supervise acts on: sigs
// gets SIGINT and SIGTERM (shut down), hups SIGHUP (reload the config).
// stop ends both relays; calling it more than once is harmless.
func shutdownSignals() (sigs, hups chan os.Signal, stop func()) {
	sigs = make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	hups = make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	return sigs, hups, func() {
		signal.Stop(sigs)
		signal.Stop(hups)
	}
}

// startEventLog logs every event of events (a subscription that closes
// when its supervisor or member does) in a goroutine of its own. wait
// returns once the subscription has closed and been logged, or after a
// second: a Close that failed may never end the subscription.
func (a *superviseCmd) startEventLog(events <-chan mcpvisor.Event) (wait func()) {
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		a.logEvents(events)
	}()
	return func() {
		select {
		case <-logged:
		case <-time.After(time.Second):
		}
	}
}

// gatewayOptions are the gateway's options that come from the flags and
// the set-up, the same in both modes, with the dashboard (single-node
// mode gives it its reload button and login relay).
func (a *superviseCmd) gatewayOptions(f superviseFlags, setup gatewaySetup) gateway.Options {
	names, _ := gateway.ParseNameStyle(f.toolNames) // checked by gatewaySetup
	toolMode, _ := gateway.ParseToolMode(f.toolMode)
	if f.bareNames {
		names = gateway.NamesBare
	}
	return gateway.Options{
		Logger: a.log, Version: version(), Allow: f.allowTools, Deny: f.denyTools,
		Token: setup.token, Access: setup.access, LocalOnly: setup.local, AllowedOrigins: f.allowOrigins,
		Names: names, NameBudget: f.nameBudget,
		MaxSessions: f.maxSessions, MaxStreamsPerSession: f.maxStreams, ChannelQueue: f.channelQueue,
		MaxSessionState: f.maxState, MaxSessionMemory: f.maxMemory, BodyTimeout: f.bodyTimeout,
		SSEPollAfter: f.pollAfter, SessionSeal: setup.seal, StartupWait: f.startupWait,
		Parts:          []gateway.Part{dashboard.New(dashboard.Options{})},
		ResourceServer: a.resourceServer(setup.auth, setup.listenAddr, f.mgmtTools),
		ToolMode:       toolMode, SearchBudgetTokens: f.searchBudget, AlwaysOffer: f.alwaysOffer,
		MaxResultChars: f.maxResultChars,
	}
}

// gatewayServing runs a gateway's goroutines: its background work from
// the start, then its HTTP listener and stdio once the servers are
// configured.
//
// Concurrency: the methods are called by supervise's goroutine only.
type gatewayServing struct {
	gw  *gateway.Gateway
	app *app
	// ctx lives until stop; the goroutines serve under it.
	ctx    context.Context
	cancel context.CancelFunc
	served sync.WaitGroup
	// stdinDone is closed when stdin ends; never when stdio is not served.
	stdinDone chan struct{}
}

// serveGateway starts gw's background work (gw.Run).
func (a *superviseCmd) serveGateway(gw *gateway.Gateway) *gatewayServing {
	ctx, cancel := context.WithCancel(context.Background())
	s := &gatewayServing{gw: gw, app: a.app, ctx: ctx, cancel: cancel, stdinDone: make(chan struct{})}
	s.served.Go(func() { gw.Run(ctx, 0) })
	return s
}

// serveHTTP serves the gateway on ln, if any, until stop; the caller logs
// the URLs, which differ between the modes.
func (s *gatewayServing) serveHTTP(ln net.Listener) {
	if ln == nil {
		return
	}
	s.served.Go(func() {
		if err := s.gw.Serve(s.ctx, ln); err != nil {
			s.app.log.Error().Err(err).Msg("HTTP listener failed")
		}
	})
}

// serveStdio serves MCP on stdin and stdout until stop or the end of
// stdin (then stdinDone closes).
func (s *gatewayServing) serveStdio() {
	go func() {
		defer close(s.stdinDone)
		if err := s.gw.ServeStdio(s.ctx, os.Stdin, os.Stdout); err != nil {
			s.app.log.Error().Err(err).Msg("stdio")
		}
	}()
	s.app.log.Info().Msg("gateway serving MCP on stdin/stdout")
}

// stop closes the gateway and waits for its background work and its HTTP
// listener to end. (The stdio goroutine ends with the gateway's context;
// its read of stdin may outlast it, as any read of a pipe may.)
func (s *gatewayServing) stop() {
	s.gw.Close()
	s.cancel()
	s.served.Wait()
}

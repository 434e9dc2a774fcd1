package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/mcpvisor/mcpvisor/mcpserver"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// The protocol is mcpserver's: sessions (Mcp-Session-Id over HTTP, the
// stdio connection), the handshake and stateless eras, GET streams and
// their replay, subscriptions/listen, SSE polling, the bounds on
// sessions and streams, and the requests the gateway sends its clients.
// The gateway is the mcpserver.Handler behind it: ServeMCP serves what
// the pool offers (handler.go), and the options below tell the server
// what the gateway declares and how its results are shaped.

// Defaults of the gateway's bounds (Options.MaxSessions,
// Options.MaxStreamsPerSession).
const (
	// DefaultMaxSessions bounds the HTTP sessions kept at once. A session
	// costs about 1.5 KB idle (more with notifications waiting for its
	// GET stream), so the cap keeps a flood of initialize requests that
	// are never closed to a couple of MB, while leaving a thousand
	// clients room.
	DefaultMaxSessions = 1000
	// DefaultMaxStreamsPerSession bounds the GET streams open at once on
	// one session: one is what a client needs, a few leave room for one
	// reconnecting before the old stream is noticed gone.
	DefaultMaxStreamsPerSession = 4
)

// DefaultSSERetry is Options.SSERetry's zero value: how long a client
// whose call is polled is told to wait before it resumes.
const DefaultSSERetry = time.Second

// SuggestedSSEPollAfter is a sane Options.SSEPollAfter for a gateway
// behind a proxy that cuts responses idle for a minute. Polling is off by
// default because a call that may be polled runs on a goroutine of its
// own, which costs every call a hand-off (10–15 µs of the gateway's CPU
// per call on the 2-core VM of docs/protocol.md), whether it is polled or
// not.
const SuggestedSSEPollAfter = 30 * time.Second

// newServer returns the MCP server of g.
func newServer(g *Gateway) *mcpserver.Server {
	o := g.opts
	return mcpserver.New(mcpserver.Options{
		Info:         serverInfo(o.Version),
		Instructions: instructions,
		Capabilities: g.capabilitiesFor,
		Handler:      g,
		Middleware:   append([]mcpserver.Middleware{g.view.callers.record}, g.trail.withAudit(middleware(g.tracer, g.requests))...),
		Subscriptions: func(ctx context.Context, _ *mcpserver.Request, want protocol.NotificationSubscriptions) (protocol.NotificationSubscriptions, func()) {
			want.ResourceSubscriptions = g.view.visibleURIs(ctx, want.ResourceSubscriptions)
			return want, g.subs.hold(ctx, want.ResourceSubscriptions)
		},
		ModernResult: func(r *mcpserver.Request, result any) any { return g.pool.modernResult(r.Method, result) },
		OnSessionClosed: func(s *mcpserver.Session) {
			g.view.callers.forget(s)
			g.subs.releaseAll(s, s.Subscriptions())
		},
		OnSessionRestored: g.subs.restore,
		Logger:            g.log,
		MaxSessionState:   o.MaxSessionState,
		MaxRetained:       o.MaxSessionMemory,
		HTTP: mcpserver.HTTPOptions{
			BodyTimeout:          o.BodyTimeout,
			OutboxSize:           o.OutboxSize,
			MaxSessions:          max(o.MaxSessions, 0),
			MaxStreamsPerSession: max(o.MaxStreamsPerSession, 0),
			PollAfter:            max(o.SSEPollAfter, 0),
			Pollable:             func(r *mcpserver.Request) bool { return r.Method == protocol.MethodToolsCall },
			SSERetry:             o.SSERetry,
			KeepAlive:            o.KeepAlive,
			Seal:                 o.SessionSeal,
			CheckHeaders: func(h http.Header, r *mcpserver.Request) *protocol.Error {
				if r.Method != protocol.MethodToolsCall {
					return nil
				}
				return g.pool.checkParamHeaders(h, r.Params)
			},
		},
	})
}

// restore subscribes upstream again to the resources a
// sealed session that this gateway takes up from its id had subscribed
// to on the replica before (OnSessionRestored). It runs aside, bounded:
// the session's request does not wait for the servers.
func (rs *resourceSubs) restore(s *mcpserver.Session) {
	uris := s.Subscriptions()
	if len(uris) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, uri := range uris {
			if e := rs.acquire(ctx, s, uri); e != nil {
				rs.log.Debug().Str("uri", uri).Str("error", e.Message).Msg("subscribing upstream for a restored session")
			}
		}
		if s.Closed() { // closed meanwhile: OnSessionClosed may have released before we held
			rs.releaseAll(s, uris)
		}
	}()
}

// counted is the middleware that counts the requests being served (for
// Drain) and refuses new ones while the gateway drains.
func (rc *requestCount) counted(next mcpserver.Handler) mcpserver.Handler {
	return mcpserver.HandlerFunc(func(ctx context.Context, w mcpserver.ResponseWriter, r *mcpserver.Request) {
		if !rc.begin() {
			w.Error(errorf(CodeShuttingDown, "mcpvisor gateway is shutting down"))
			return
		}
		defer rc.end()
		next.ServeMCP(ctx, w, r)
	})
}

// ServeStdio serves one downstream client over newline-delimited JSON-RPC
// on r (its stdin) and w (its stdout) until r ends or ctx does. Requests
// are served concurrently; every frame is written whole, one at a time.
// When it returns, the session's requests are cancelled.
func (g *Gateway) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	return g.srv.ServeStdio(ctx, r, w)
}

// capabilitiesFor is what the gateway declares in answer to r (an
// initialize or a server/discover): to a client of the stateless era,
// the extensions too (tasks, passed on to the servers that support it;
// skills while a server offers them).
func (g *Gateway) capabilitiesFor(r *mcpserver.Request) protocol.ServerCapabilities {
	caps := capabilities()
	if r.Method != protocol.MethodDiscover {
		return caps
	}
	caps.Extensions = map[string]json.RawMessage{protocol.ExtensionTasks: json.RawMessage(`{}`)}
	if _, settings := g.pool.skillServers(); settings != nil {
		caps.Extensions[protocol.ExtensionSkills] = settings
	}
	return caps
}

// capabilities is what the gateway offers downstream.
func capabilities() protocol.ServerCapabilities {
	empty := json.RawMessage(`{}`)
	return protocol.ServerCapabilities{
		Tools:        &protocol.ListChangedCapability{ListChanged: true},
		Prompts:      &protocol.ListChangedCapability{ListChanged: true},
		Resources:    &protocol.ResourcesCapability{Subscribe: true, ListChanged: true},
		Logging:      &empty,
		Completions:  &empty,
		Experimental: map[string]json.RawMessage{channelCapability: empty},
	}
}

const instructions = "mcpvisor gateway: the tools, prompts and resources of every server it supervises. " +
	"Tool and prompt names are mcp__<server>__<name>."

// serverInfo is what the gateway says it is (serverInfo), at version.
func serverInfo(version string) protocol.Implementation {
	return protocol.Implementation{Name: "mcpvisor", Title: "mcpvisor gateway", Version: version}
}

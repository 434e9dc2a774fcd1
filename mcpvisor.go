// Package mcpvisor keeps an agent host connected to every MCP server it is
// configured with: it starts them, speaks their protocol era, notices
// failure, and tells subscribers what changed. The host sees one tool pool
// and one event stream; it never handles a transport.
//
// A host starts a Supervisor, gives it servers, offers Tools to its model
// and routes the model's calls with CallTool:
//
//	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{Logger: log})
//	cfg, err := config.Load(config.Options{}) // github.com/mcpvisor/mcpvisor/config
//	res, err := sup.SetServers(ctx, cfg.Servers, mcpvisor.AwaitSettled(10*time.Second))
//	for _, t := range sup.Tools() { ... t.Name, t.Definition.InputSchema ... }
//	out, err := sup.CallTool(ctx, "mcp__github__create_issue", args)
//	defer sup.Close(ctx)
//
// Every server is supervised by its own actor, which alone owns the
// server's connection; calls go straight to the live session without
// waiting on any actor.
//
// The supervision engine lives in this package, beside the types it
// works on: the registry actor (registry*.go), the server actors
// (server*.go, reconnect.go, liveness.go), the call path (calls.go), the
// tool pool (pool_*.go), pins, permissions, authorization (auth_source.go)
// and what servers ask of the host (host_*.go). So every type a host
// sees is declared once, here, and the engine uses it as it is: Go
// forbids a package beneath this one to import it, and a package beneath
// holding the engine would need types of its own and a conversion layer.
// Package actors beneath holds only the actor machinery (actor system,
// supervision strategy, dispatcher, connect scheduler); one MCP client
// session is internal/session.
//
// mcpvisor never writes to stdout (a host may itself be a stdio MCP
// server); it logs only through the zerolog logger in Options.
package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Errors. Test with errors.Is; a server's own JSON-RPC error is a
// *protocol.Error (errors.As).
var (
	ErrConnectionClosed  = session.ErrConnectionClosed
	ErrServerRestarting  = session.ErrServerRestarting
	ErrTimeout           = session.ErrTimeout
	ErrVersionMismatch   = session.ErrVersionMismatch
	ErrMalformedResponse = session.ErrMalformedResponse
)

// SetOption configures SetServers.
type SetOption func(*setOptions)

type setOptions struct {
	await   bool
	timeout time.Duration
}

// AwaitSettled makes SetServers wait until every server has settled
// (ready, failed, needs-auth, disabled — see State.Settled; lazy servers
// excepted), for at most timeout (zero: until ctx ends). Servers still
// connecting then are named in SetResult.Unsettled and go on connecting;
// that is not an error.
func AwaitSettled(timeout time.Duration) SetOption {
	return func(o *setOptions) { o.await, o.timeout = true, timeout }
}

// SetServers makes servers the configured set and returns what changed:
// new names are started, missing ones shut down (the full ladder),
// changed ones reconnected when the change affects the connection,
// unchanged ones left alone, invalid ones reported in Errors (a running
// server keeps its old config). Disabled servers are never started; lazy
// ones wait for first use. Every server reaches a state Status shows. By
// default it returns once the change is applied and connects continue in
// the background; with AwaitSettled it waits for them.
func (s *Supervisor) SetServers(ctx context.Context, servers map[string]ServerConfig, opts ...SetOption) (SetResult, error) {
	var o setOptions
	for _, f := range opts {
		f(&o)
	}
	res, err := s.reg.setServers(ctx, servers)
	if err != nil || !o.await {
		return res, err
	}
	wait := ctx
	if o.timeout > 0 {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	switch err := s.WaitSettled(wait); {
	case err == nil:
		res.Settled = true
	case errors.Is(err, ErrClosed):
		return res, err
	default:
		for _, st := range s.Status() {
			if !st.State.Settled() && !(st.Lazy && st.State == StatePending) {
				res.Unsettled = append(res.Unsettled, st.Name)
			}
		}
	}
	return res, nil
}

// CallTool calls a tool by its qualified name. args is the tool's
// arguments: a json.RawMessage or []byte of a JSON object, nil, or any
// value that encodes to one. A tool that failed is a result with IsError
// set. An error means the call did not complete: ErrUnknownTool,
// ErrServerNotReady, ErrConnectionClosed, a *TimeoutError, or the
// server's *protocol.Error. The call has the server's timeoutMs (or
// Options.CallTimeout) as its deadline unless ctx has one.
func (s *Supervisor) CallTool(ctx context.Context, name string, args any) (*protocol.CallToolResult, error) {
	raw, err := encodeArgs(args)
	if err != nil {
		return nil, fmt.Errorf("mcpvisor: arguments of %s: %w", name, err)
	}
	return s.callTool(ctx, name, raw, RequestOptions{})
}

func encodeArgs(args any) (json.RawMessage, error) {
	switch a := args.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return a, nil
	case []byte:
		return json.RawMessage(a), nil
	}
	return json.Marshal(args)
}

// ReconnectAll reconnects every enabled server.
func (s *Supervisor) ReconnectAll(ctx context.Context) error { return s.reg.reconnect(ctx, "") }

// SubscribeOption configures Subscribe.
type SubscribeOption func(*subscribeOptions)

type subscribeOptions struct {
	resume bool
	after  uint64
	buffer int
}

// FromSequence replays the remembered events after sequence number seq
// before live ones (FromSequence(0): everything remembered). When some of
// them are no longer remembered, a gap event says how many.
func FromSequence(seq uint64) SubscribeOption {
	return func(o *subscribeOptions) { o.resume, o.after = true, seq }
}

// BufferSize sets how many undelivered events the subscription holds
// (default 256). A subscriber that falls further behind loses events and
// is told how many by a gap event.
func BufferSize(n int) SubscribeOption {
	return func(o *subscribeOptions) { o.buffer = n }
}

// ResolveSubscribeOptions applies Subscribe's options and returns what
// they ask for, for an event stream kept outside a Supervisor (a cluster
// member's): resume and after (FromSequence: replay the remembered
// events after sequence number after), and buffer (BufferSize; 0: the
// stream's default).
func ResolveSubscribeOptions(opts ...SubscribeOption) (after uint64, resume bool, buffer int) {
	var o subscribeOptions
	for _, f := range opts {
		f(&o)
	}
	return o.after, o.resume, o.buffer
}

// Subscribe returns the event stream: server state changes, pool diffs
// and what servers push, each numbered, as the typed events of events.go.
// A slow subscriber never blocks the supervisor. The channel closes when
// ctx ends or the supervisor closes.
func (s *Supervisor) Subscribe(ctx context.Context, opts ...SubscribeOption) <-chan Event {
	var o subscribeOptions
	for _, f := range opts {
		f(&o)
	}
	return subscribeAs(&s.reg, ctx, o.resume, o.after, o.buffer, s.events.convert)
}

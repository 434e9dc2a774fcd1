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
// mcpvisor never writes to stdout (a host may itself be a stdio MCP
// server); it logs only through the zerolog logger in Options.
package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpvisor/mcpvisor/actors"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/session"
)

// Errors. Test with errors.Is; a server's own JSON-RPC error is a
// *protocol.Error (errors.As).
var (
	ErrClosed               = actors.ErrClosed
	ErrUnknownTool          = actors.ErrUnknownTool
	ErrUnknownPrompt        = actors.ErrUnknownPrompt
	ErrUnknownServer        = actors.ErrUnknownServer
	ErrServerNotReady       = actors.ErrServerNotReady
	ErrServerOff            = actors.ErrServerOff
	ErrNeedsApproval        = actors.ErrNeedsApproval
	ErrHostTool             = actors.ErrHostTool
	ErrUnsupportedTransport = actors.ErrUnsupportedTransport
	ErrConnectionClosed     = session.ErrConnectionClosed
	ErrServerRestarting     = session.ErrServerRestarting
	ErrTimeout              = session.ErrTimeout
	ErrVersionMismatch      = session.ErrVersionMismatch
	ErrMalformedResponse    = session.ErrMalformedResponse
	// ErrUnresponsive: a server owed an answer, sent nothing, and did not
	// answer a ping probe (ReconnectPolicy.ProbeAfter); the calls failed
	// by the reconnect that follows match it too.
	ErrUnresponsive = actors.ErrUnresponsive
)

// ConfigHash identifies what runs under a server's name (the members of
// its config that reach the server, hashed): the discovery cache's key.
func ConfigHash(cfg ServerConfig) string { return actors.ConfigHash(cfg.plain()) }

// Supervisor keeps a set of MCP servers connected.
//
// Concurrency: every method may be called from any goroutine at any
// time, Close included. Calls (CallTool and friends) go straight to the
// server's live session and wait on no actor; changes (SetServers,
// Connect, Disconnect, Toggle, Reconnect) are messages to the registry
// actor, applied one at a time in the order they arrive. Status, Tools
// and the lists read snapshots the actors publish atomically: each is
// consistent in itself, and two of them may straddle a change.
type Supervisor struct {
	sys *actors.System
	// events converts the core's events for every subscription: touched
	// only on the registry's goroutine (actors.SubscribeAs).
	events eventConverter
}

// Start starts a Supervisor with no servers; give it some with
// SetServers. ctx is not retained.
func Start(ctx context.Context, opts Options) (*Supervisor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sys, err := actors.Start(opts.plain())
	if err != nil {
		return nil, err
	}
	return &Supervisor{sys: sys}, nil
}

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
	plain, err := s.sys.SetServers(ctx, plainServers(servers))
	res := setResultOf(plain)
	if err != nil || !o.await {
		return res, err
	}
	wait := ctx
	if o.timeout > 0 {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	switch err := s.sys.WaitSettled(wait); {
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

// Toggle hides a server's tools, prompts and resources and refuses calls
// to it with ErrServerOff (on=false), keeping its connection so that
// toggling it on again is instant; on=true offers them again. The pool has
// changed when Toggle returns. Each toggle publishes an
// EventServerToggled and the pool's diffs. A server disabled in its config
// cannot be toggled on.
func (s *Supervisor) Toggle(ctx context.Context, name string, on bool) error {
	return s.sys.Toggle(ctx, name, on)
}

// WaitSettled blocks until every server has reached a state that waits
// for nothing (ready, failed, disabled; lazy servers excepted), or ctx
// ends.
func (s *Supervisor) WaitSettled(ctx context.Context) error { return s.sys.WaitSettled(ctx) }

// Tools returns the tool pool: the host's built-ins (Options.Builtins)
// sorted by name, then the tools of every ready server, named
// mcp__<server>__<tool>, sorted by name. The slice is the caller's.
func (s *Supervisor) Tools() []Tool { return toolsOf(s.sys.Tools()) }

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
	return hostResult(s.sys.CallTool(ctx, name, raw))
}

// CallServerTool calls the tool a server names tool, by the server's
// name and its own name for the tool rather than the pool's, with the
// same arguments, deadline and errors as CallTool. The tool must be one
// the pool offers (a lazy server's is found before it connects); a tool
// the server's tools filter drops is ErrUnknownTool.
func (s *Supervisor) CallServerTool(ctx context.Context, server, tool string, args any) (*protocol.CallToolResult, error) {
	name, ok := s.sys.ToolName(server, tool)
	if !ok { // another server's tool (or a built-in) holds the name
		return nil, fmt.Errorf("%w: %q of server %q", ErrUnknownTool, tool, server)
	}
	return s.CallTool(ctx, name, args)
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

// ListResources returns the resources and resource templates of one
// server, or of every server when server is empty (sorted by server, then
// URI; every page of the server's lists). A named server that is not
// ready is a *NotReadyError; one toggled off, ErrServerOff.
func (s *Supervisor) ListResources(server string) ([]Resource, []ResourceTemplate, error) {
	rs, ts, err := s.sys.Resources(server)
	res, tmpl := resourcesOf(rs, ts)
	return res, tmpl, hostErr(err)
}

// ReadResource reads the resource at uri from server.
func (s *Supervisor) ReadResource(ctx context.Context, server, uri string) (*protocol.ReadResourceResult, error) {
	return hostResult(s.sys.ReadResource(ctx, server, uri))
}

// ListPrompts returns the prompts of one server, or of every server when
// server is empty, named mcp__<server>__<prompt>, sorted by name.
func (s *Supervisor) ListPrompts(server string) ([]Prompt, error) {
	ps, err := s.sys.Prompts(server)
	return promptsOf(ps), hostErr(err)
}

// GetPrompt renders a prompt by its qualified name.
func (s *Supervisor) GetPrompt(ctx context.Context, name string, args map[string]string) (*protocol.GetPromptResult, error) {
	return hostResult(s.sys.GetPrompt(ctx, name, args))
}

// Ping checks that a ready server answers (with ping, or server/discover
// in the 2026-07-28 era, which has no ping).
func (s *Supervisor) Ping(ctx context.Context, server string) error {
	return hostErr(s.sys.Ping(ctx, server))
}

// Status returns every configured server's status, sorted by name.
func (s *Supervisor) Status() []ServerStatus { return statuses(s.sys.StatusAndTools()) }

// Reconnect drops a server's connection and connects it again (through
// the connect scheduler). It returns once the reconnect is queued.
func (s *Supervisor) Reconnect(ctx context.Context, name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty name (use ReconnectAll)", ErrUnknownServer)
	}
	return s.sys.Reconnect(ctx, name)
}

// RecheckToolPins has every connected server check its tools against the
// pins again (Options.ToolPins), after the user approved definitions: a
// tool now pinned joins the pool, and a tools_changed event says so. It
// returns at once; the rechecks run in the background.
func (s *Supervisor) RecheckToolPins(ctx context.Context) error { return s.sys.RecheckToolPins(ctx) }

// ReconnectAll reconnects every enabled server.
func (s *Supervisor) ReconnectAll(ctx context.Context) error { return s.sys.Reconnect(ctx, "") }

// LastSeq returns the sequence number of the latest event, so that a host
// can act and then see exactly the events that followed:
//
//	seq, _ := sup.LastSeq(ctx)
//	sup.CallTool(ctx, "mcp__srv__announce", args)
//	events := sup.Subscribe(ctx, mcpvisor.FromSequence(seq))
func (s *Supervisor) LastSeq(ctx context.Context) (uint64, error) { return s.sys.LastSeq(ctx) }

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

// Subscribe returns the event stream: server state changes, pool diffs
// and what servers push, each numbered, as the typed events of events.go.
// A slow subscriber never blocks the supervisor. The channel closes when
// ctx ends or the supervisor closes.
func (s *Supervisor) Subscribe(ctx context.Context, opts ...SubscribeOption) <-chan Event {
	var o subscribeOptions
	for _, f := range opts {
		f(&o)
	}
	return actors.SubscribeAs(s.sys, ctx, o.resume, o.after, o.buffer, s.events.convert)
}

// Close shuts every server down (stdio servers with the full ladder:
// close stdin, SIGTERM, SIGKILL to the process group) and stops the
// supervisor. In-flight calls fail with ErrConnectionClosed. It returns
// when everything is gone or ctx ends, naming the servers still stopping
// in the second case. Close is idempotent.
func (s *Supervisor) Close(ctx context.Context) error { return s.sys.Close(ctx) }

package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpvisor/mcpvisor/internal/session"
	"github.com/mcpvisor/mcpvisor/oauth"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Server returns the operations on the one server configured as name.
// It checks nothing: each operation returns ErrUnknownServer for a name
// not configured when it runs.
func (s *Supervisor) Server(name string) Server { return Server{s: s, name: name} }

// Server is one of a Supervisor's servers, by name: its status; its
// connection (Reconnect, Toggle, Disconnect, Login); and what goes to it
// alone: calls by its own tool names, ping, logging level, completions,
// an extension's request, its instructions. A handle got from
// Supervisor.Server, safe for concurrent use like the Supervisor.
type Server struct {
	s    *Supervisor
	name string
}

// Name returns the server's name.
func (sv Server) Name() string { return sv.name }

// Ping checks that a ready server answers (with ping, or server/discover
// in the 2026-07-28 era, which has no ping).
func (sv Server) Ping(ctx context.Context) error {
	s, server := sv.s, sv.name
	h, err := s.handle(server)
	if err != nil {
		return err
	}
	_, err = onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (struct{}, error) {
		return struct{}{}, sess.Ping(ctx)
	})
	return err
}

// SetLogLevel asks a server for its log messages at level and above
// (they arrive as LogMessageEvent), from now on and on every later
// connection of the server. How the level travels depends on the
// server's protocol era: a server of 2025-11-25 or before is sent
// logging/setLevel (ErrNoLogging when it declared no logging capability;
// its own refusal comes back as a *protocol.Error); a 2026-07-28 server,
// which has no such request, gets the level in the _meta of every request
// sent to it from then on (io.modelcontextprotocol/logLevel). A server
// that is not connected gets it when it connects, and SetLogLevel returns
// nil. ErrUnknownServer for a name not configured, ErrInvalidLogLevel
// for a level not of the specification.
func (sv Server) SetLogLevel(ctx context.Context, level protocol.LoggingLevel) error {
	s, server := sv.s, sv.name
	if !level.Valid() {
		return fmt.Errorf("%w: %q", session.ErrInvalidLogLevel, level)
	}
	h, err := s.handle(server)
	if err != nil {
		return err
	}
	h.logLevel.Store(&level)
	v, err := ready(h)
	if err != nil {
		return nil // a connect in progress takes it when installed (logLevelAfterConnect)
	}
	ctx, cancel := withDefaultTimeout(ctx, s.opts.callTimeout(h))
	defer cancel()
	return hostErr(v.sess.SetLogLevel(ctx, level))
}

// Instructions returns the instructions the server gave at initialize
// on its current connection: "" for an unknown server, one not ready, or
// one that gave none. A gateway indexes them and shows their first line
// as the server's purpose (gateway.ServerSource). Safe for
// concurrent use: it reads the server's published view.
func (sv Server) Instructions() string {
	s, server := sv.s, sv.name
	h, err := s.handle(server)
	if err != nil {
		return ""
	}
	v := h.view.Load()
	if v == nil || v.sess == nil {
		return ""
	}
	return v.sess.Peer().Instructions
}

// Request sends a server a request the API has no method for (an
// extension's: tasks/get, skills/list, …) and returns its result raw;
// params is a JSON object or nil, and gets the request's _meta.
func (sv Server) Request(ctx context.Context, method string, params json.RawMessage, o RequestOptions) (json.RawMessage, error) {
	s, server := sv.s, sv.name
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (json.RawMessage, error) {
		return sess.Request(ctx, method, params, o.session())
	})
}

// Complete asks a server for completions of an argument of one of its
// prompts (ref.Type protocol.RefPrompt, ref.Name the server's own prompt
// name) or resource templates (protocol.RefResource, ref.URI the
// template), given the argument's value so far and, optionally, the
// arguments already resolved. The server's JSON-RPC error (for one that
// does not offer completions) is returned as a *protocol.Error.
func (sv Server) Complete(ctx context.Context, ref protocol.CompletionReference, arg protocol.CompletionArgument, cctx *protocol.CompletionContext) (*protocol.CompleteResult, error) {
	s, server := sv.s, sv.name
	h, err := s.handle(server)
	if err != nil {
		return nil, err
	}
	params := protocol.CompleteParams{Ref: ref, Argument: arg, Context: cctx}
	return onSession(ctx, s, h, func(ctx context.Context, sess *session.Session) (*protocol.CompleteResult, error) {
		return sess.Complete(ctx, params)
	})
}

// Login authorizes the server and reconnects it. ua runs the user's part
// of the authorization code flow; nil means a loopback redirect on
// 127.0.0.1 with the URL shown through Options.OAuth.OpenURL (a browser,
// or the host's own prompt). Servers with a machine grant
// (client_credentials) need no user agent. A server held for approval is
// refused with ErrNeedsApproval, and nothing of it is contacted.
func (sv Server) Login(ctx context.Context, ua oauth.UserAgent) error {
	s, name := sv.s, sv.name
	h, err := s.handle(name)
	if err != nil {
		return err
	}
	if cfg := h.view.Load().cfg; cfg.held() {
		// Nothing of a held server is contacted, its authorization
		// server included.
		return fmt.Errorf("%w: %q: approve it before logging in: %s", ErrNeedsApproval, name, cfg.NeedsApproval)
	}
	src := h.currentAuth()
	if src == nil {
		cfg := h.view.Load().cfg
		if !authorizes(&cfg, &s.opts) {
			return fmt.Errorf("mcpvisor: server %q does not use OAuth", name)
		}
		if src, err = h.authSource(&cfg, &s.opts, serverLogger(s.opts.Logger, name)); err != nil {
			return err
		}
	}
	if ua == nil {
		open := s.opts.OAuth.OpenURL
		if open == nil {
			return errors.New("mcpvisor: Login needs a user agent or OAuthOptions.OpenURL")
		}
		settings, _ := h.view.Load().cfg.OAuthSettings()
		host, port := "", 0
		if settings != nil {
			host, port = settings.CallbackHost, settings.CallbackPort
		}
		lb, err := oauth.NewLoopback(host, port, func(ctx context.Context, u string) error { return open(ctx, name, u) })
		if err != nil {
			return err
		}
		defer lb.Close()
		ua = lb
	}
	if err := src.Login(ctx, ua, ""); err != nil {
		return err
	}
	return s.reconnect(ctx, name)
}

// State returns the server's state, read from
// its published view without a mailbox hop; an unknown name is an
// ErrUnknownServer. (Package cluster asks it before running a call
// that arrived from another member, so that a server still connecting
// answers "not ready" rather than "unknown tool".)
func (sv Server) State() (State, error) {
	s, name := sv.s, sv.name
	h, err := s.handle(name)
	if err != nil {
		return "", err
	}
	return h.view.Load().state, nil
}

// PoolReflects reports whether the tool pool reflects the server's
// current state: a server's status says it is ready a moment before the
// registry folds its lists into the pool (rebuilds are spaced).
func (sv Server) PoolReflects() bool {
	s, name := sv.s, sv.name
	h, err := s.handle(name)
	return err == nil && s.poolHas(h)
}

// Disconnect shuts the server down (the full ladder) and removes it
// from the configured set, leaving every other server alone; its tools
// have left the pool when Disconnect returns. A name not configured is
// ErrUnknownServer.
func (sv Server) Disconnect(ctx context.Context) error {
	s, name := sv.s, sv.name
	res, err := s.PatchServers(ctx, nil, []string{name})
	if err != nil {
		return err
	}
	return res.Errors[name]
}

// Status returns the server's status, or ErrUnknownServer.
func (sv Server) Status() (ServerStatus, error) {
	s, name := sv.s, sv.name
	st, _, err := s.pooledStatus(name)
	return st, err
}

// CallTool calls the tool the server names tool (its own name for it,
// not the pool's), with the same arguments, deadline and errors as
// Supervisor.CallTool. The tool must be one
// the pool offers (a lazy server's is found before it connects); a tool
// the server's tools filter drops is ErrUnknownTool.
func (sv Server) CallTool(ctx context.Context, tool string, args any) (*protocol.CallToolResult, error) {
	s, server := sv.s, sv.name
	name, ok := sv.ToolName(tool)
	if !ok { // another server's tool (or a built-in) holds the name
		return nil, fmt.Errorf("%w: %q of server %q", ErrUnknownTool, tool, server)
	}
	return s.CallTool(ctx, name, args)
}

// Reconnect drops a server's connection and connects it again (through
// the connect scheduler). It returns once the reconnect is queued.
func (sv Server) Reconnect(ctx context.Context) error {
	s, name := sv.s, sv.name
	if name == "" {
		return fmt.Errorf("%w: empty name (use ReconnectAll)", ErrUnknownServer)
	}
	return s.reconnect(ctx, name)
}

// ToolName returns the pool name of the tool server lists as tool: the
// name a collision gave it, else QualifiedName. ok is false when that
// name routes to a built-in or to another server's tool. It reads the
// published pool; it copies nothing.
func (sv Server) ToolName(tool string) (name string, ok bool) {
	s, server := sv.s, sv.name
	p := s.pool.Load()
	name = p.knownName("tool", server, tool)
	if _, builtin := p.builtinByName[name]; builtin {
		return name, false
	}
	for _, m := range []*pmap[string, poolEntry]{&p.toolsByName, &p.hiddenTools} {
		if e, found := m.Get(name); found && e.h.name != server {
			return name, false
		}
	}
	return name, true
}

// Toggle hides a server's tools, prompts and resources and refuses calls
// to it with ErrServerOff (on=false), keeping its connection so that
// toggling it on again is instant; on=true offers them again. The pool has
// changed when Toggle returns. Each toggle publishes an
// EventServerToggled and the pool's diffs. A server disabled in its config
// cannot be toggled on.
func (sv Server) Toggle(ctx context.Context, on bool) error {
	s, name := sv.s, sv.name
	reply := make(chan error, 1)
	err, askErr := ask(ctx, s, toggleServer{name: name, on: on, reply: reply}, reply)
	if askErr != nil {
		return askErr
	}
	return err
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// callCmd is `mcpvisor call`: it starts a one-shot supervisor and calls
// one tool. It runs in cobra's goroutine.
type callCmd struct{ *app }

func (a callCmd) command() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "call TOOL [ARGS_JSON]",
		Short: "Call one tool of the pool and print its result as JSON",
		Long: `call starts the configured servers, waits until TOOL is in the pool (or every
server has settled, at most --timeout), calls it with ARGS_JSON (a JSON object,
default {}), prints the CallToolResult as indented JSON on stdout, and shuts the
servers down.

TOOL is the qualified name from 'mcpvisor list', mcp__<server>__<tool>, or a
tool's own name (or <server>__<tool>) when exactly one server offers it. The call
itself is bounded by the server's timeoutMs (default $MCP_TOOL_TIMEOUT, else
100,000,000 ms, about 28 hours, as Claude Code), not --timeout.

Exit codes:
  0  the tool succeeded
  1  the result has isError (it is still printed), the tool is unknown or its
     server not ready, the call failed (nothing is printed), or the config could
     not be loaded
  2  usage error, including ARGS_JSON that is not a JSON object`,
		Example: `  mcpvisor call --config examples/demo.mcp.json mcp__calc__add '{"a":2,"b":40}'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageError("%s wants TOOL and optionally ARGS_JSON, got %d arguments", cmd.Name(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return usageError("--timeout must be positive")
			}
			toolArgs := json.RawMessage(`{}`)
			if len(args) == 2 {
				var err error
				if toolArgs, err = parseToolArgs(args[1]); err != nil {
					return usageError("ARGS_JSON: %v", err)
				}
			}
			return a.call(cmd.Context(), args[0], toolArgs, timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "how long to wait for the tool's server to connect")
	return cmd
}

// parseToolArgs checks that s is one JSON object.
func parseToolArgs(s string) (json.RawMessage, error) {
	raw := bytes.TrimSpace([]byte(s))
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, errors.New("want a JSON object, got " + typeErr.Value)
		}
		return nil, err
	}
	if obj == nil {
		return nil, errors.New("want a JSON object, got null")
	}
	return json.RawMessage(raw), nil
}

func (a callCmd) call(ctx context.Context, tool string, args json.RawMessage, timeout time.Duration) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	sup, err := a.startSupervisor(ctx, true)
	if err != nil {
		return failed(nil)
	}
	result, ok := a.callOn(ctx, sup, tool, args, timeout)
	if result != nil {
		out, err := json.MarshalIndent(result, "", "  ")
		if err == nil {
			_, err = a.stdout.Write(append(out, '\n'))
		}
		if err != nil {
			a.log.Error().Err(err).Msg("writing the result")
			ok = false
		}
	}
	if a.closeSupervisor(sup) != nil {
		ok = false
	}
	if !ok {
		return failed(nil)
	}
	return nil
}

// callOn configures sup, waits for tool and calls it. It returns the
// result to print (nil when the call did not complete) and whether the
// command succeeded; it logs every failure.
func (a callCmd) callOn(ctx context.Context, sup *mcpvisor.Supervisor, tool string, args json.RawMessage, timeout time.Duration) (*protocol.CallToolResult, bool) {
	// Subscribe before configuring, so that no pool change is missed.
	subCtx, unsubscribe := context.WithCancel(ctx)
	defer unsubscribe()
	events := sup.Subscribe(subCtx)

	if cfg, _, cfgOK := a.configs.apply(ctx, sup); cfgOK && len(cfg.Servers) == 0 {
		a.log.Warn().Msg("no servers configured")
	}
	if !a.waitForTool(ctx, sup, events, tool, timeout) && !ofLazyServer(sup, tool) {
		// Every server has settled (or the timeout passed): a short name
		// that exactly one tool of the pool has is that tool.
		q, ok := uniqueTool(sup, tool)
		if !ok {
			a.logUnknownTool(sup, tool)
			return nil, false
		}
		tool = q
	}
	unsubscribe()

	// A lazy server's tool is called by name: the call starts it.
	result, err := sup.CallTool(ctx, tool, args)
	switch {
	case err != nil:
		a.log.Error().Err(err).Str("tool", tool).Msg("call failed")
		return nil, false
	case result.IsError:
		a.log.Error().Str("tool", tool).Msg("the tool reported an error (isError)")
		return result, false
	}
	return result, true
}

// uniqueTool returns the pool name of the one tool whose own name, or
// <server>__<name> (the gateway's short name), is name; false when none
// or several are.
func uniqueTool(sup *mcpvisor.Supervisor, name string) (string, bool) {
	var found []string
	for _, t := range sup.Tools() {
		if !t.Builtin && (t.Definition.Name == name || sanitizeName(t.Server)+"__"+sanitizeName(t.Definition.Name) == name) {
			found = append(found, t.Name)
		}
	}
	if len(found) != 1 {
		return "", false
	}
	return found[0], true
}

// ofLazyServer reports whether tool is named after a lazy server not yet
// started (its qualified-name prefix), whose tools are unknown until its
// first use.
func ofLazyServer(sup *mcpvisor.Supervisor, tool string) bool {
	for _, st := range sup.Status() {
		if st.Lazy && st.State == mcpvisor.StatePending && strings.HasPrefix(tool, strings.TrimSuffix(mcpvisor.QualifiedName(st.Name, "x"), "x")) {
			return true
		}
	}
	return false
}

// waitForTool waits until tool is in the pool, or every server has
// settled, or timeout passes; it reports whether tool is in the pool.
func (a callCmd) waitForTool(ctx context.Context, sup *mcpvisor.Supervisor, events <-chan mcpvisor.Event, tool string, timeout time.Duration) bool {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer a.reportWaiting(sup)()
	settled := make(chan error, 1)
	go func() { settled <- sup.WaitSettled(wctx) }() // ends with wctx at the latest
	for {
		if inPool(sup, tool) {
			return true
		}
		select {
		case _, open := <-events:
			if !open {
				events = nil
			}
		case err := <-settled:
			if err != nil {
				if ctx.Err() != nil {
					a.log.Warn().Msg("interrupted while the servers were connecting")
				} else {
					a.log.Warn().Stringer("timeout", timeout).Msg("servers still connecting when the timeout passed")
				}
			}
			return inPool(sup, tool)
		}
	}
}

func inPool(sup *mcpvisor.Supervisor, tool string) bool {
	for _, t := range sup.Tools() {
		if t.Name == tool {
			return true
		}
	}
	return false
}

// logUnknownTool reports a tool that is not in the pool, with what can
// be guessed about why: its server is not ready, or the name is a
// server's own tool name rather than the qualified one.
func (a callCmd) logUnknownTool(sup *mcpvisor.Supervisor, tool string) {
	ev := a.log.Error().Str("tool", tool)
	for _, st := range sup.Status() {
		if st.State != mcpvisor.StateReady && strings.HasPrefix(tool, "mcp__"+sanitizeName(st.Name)+"__") {
			ev = ev.Str("server", st.Name).Str("state", string(st.State))
			if st.LastError != "" {
				ev = ev.Str("server_error", st.LastError)
			}
			ev.Msg("unknown tool: its server is not ready")
			return
		}
	}
	var alike []string
	for _, t := range sup.Tools() {
		if t.Definition.Name == tool {
			alike = append(alike, t.Name)
		}
	}
	if len(alike) > 0 {
		ev = ev.Strs("did_you_mean", alike)
	}
	ev.Msg("unknown tool (see 'mcpvisor list')")
}

// sanitizeName replaces the characters that qualified tool names do not
// allow (outside [A-Za-z0-9_-]) with '_', as the tool pool does.
func sanitizeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '_' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Command agenthost embeds mcpvisor the way an agent host does. It
//
//  1. offers two built-in tools of its own, Read and Clock, next to the MCP
//     tools;
//  2. loads the layered config: <home>/.mcp.json, <dir>/.mcp.json and
//     <dir>/.mcp.local.json (by default the bundled home and project
//     folders, whose servers are this very program acting as a mock MCP
//     server);
//  3. starts the supervisor and waits for the servers to settle;
//  4. builds the tool list it would send to a model;
//  5. routes a scripted sequence of tool calls, as a model would emit them;
//  6. prints the events the supervisor publishes meanwhile.
//
// Run it from the repository root: go run ./examples/agenthost. Stdout is
// the program's own; the supervisor logs to stderr (-log info for more).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/config"
	"github.com/mcpvisor/mcpvisor/protocol"
)

func main() {
	// (mcpvisor starts stdio servers through a helper, this binary started
	// again in a helper mode; the library serves it before main runs, so
	// there is nothing to call here.)
	// The bundled config runs "${AGENTHOST_BIN} mock ...": this program,
	// serving as a mock MCP server over stdin and stdout. (A mock started
	// the mockserver.Command way, or its -grandchild, is marked by
	// mockserver.EnvRole instead.)
	switch {
	case len(os.Args) > 1 && os.Args[1] == "mock":
		os.Exit(mockserver.Main(os.Args[2:]))
	case mockserver.IsRequested():
		os.Exit(mockserver.Main(os.Args[1:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Stdout, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agenthost:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, stdout io.Writer, args []string) (err error) {
	flags := flag.NewFlagSet("agenthost", flag.ContinueOnError)
	dir := flags.String("dir", "examples/agenthost/project", "project directory: its .mcp.json and .mcp.local.json; Read reads under it")
	home := flags.String("home", "examples/agenthost/home", `directory of the user layer .mcp.json (-home "$HOME" for yours)`)
	level := flags.String("log", "warn", "level of the supervisor's logs on stderr")
	if err := flags.Parse(args); err != nil {
		return err
	}
	logLevel, err := zerolog.ParseLevel(*level)
	if err != nil {
		return err
	}
	sandbox, err := os.OpenRoot(*dir) // Read cannot leave it
	if err != nil {
		return fmt.Errorf("%w (run from the repository root, or pass -dir)", err)
	}
	defer sandbox.Close()
	out := &printer{w: stdout}

	// The config. Its servers are "${AGENTHOST_BIN} mock …"; we say what
	// that variable is without touching the process environment.
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// The servers of a project's .mcp.json and .mcp.local.json start only
	// once approved (nil Approvals: none is). A real host asks its user and
	// keeps the answers (trust.Store, as `mcpvisor trust` does); this
	// example approves its own bundled project only, so that -dir pointing
	// at another project shows that project's servers held, not running.
	cfg, err := config.Load(config.Options{
		Home:      *home,
		Dir:       *dir,
		Approvals: bundledProjectOnly{},
		LookupEnv: func(name string) (string, bool) {
			if name == "AGENTHOST_BIN" {
				return exe, true
			}
			return os.LookupEnv(name)
		},
	})
	if err != nil {
		return err // every problem, each a *config.Error naming file and path
	}
	out.printf("config layers: %s\n", strings.Join(cfg.Files, ", "))
	for _, name := range slices.Sorted(maps.Keys(cfg.Servers)) {
		out.printf("  %-8s from %s (%s layer)\n", name, cfg.Sources[name], cfg.Layers[name]) // the last layer defining it wins, whole
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Pending)) {
		out.printf("  %-8s held: %s\n", name, cfg.Pending[name].Reason) // its state will be needs-approval
	}
	for _, sk := range cfg.Skipped { // a layer file that does not load is left out; the others run
		out.printf("  skipped %s (%s layer): %v\n", sk.File, sk.Layer, sk.Err())
	}

	// The supervisor: our built-ins, a logger (mcpvisor never writes to
	// stdout), and a cap on the descriptions we pay tokens for.
	sup, err := mcpvisor.Start(ctx, mcpvisor.Options{
		Logger:               zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(logLevel).With().Timestamp().Logger(),
		ClientInfo:           protocol.Implementation{Name: "agenthost", Version: "0.1.0"},
		Builtins:             builtins(sandbox),
		MaxDescriptionLength: 200,
	})
	if err != nil {
		return err
	}
	h := &host{sup: sup, out: out, toolDiffs: make(chan *mcpvisor.ToolsChangedEvent, 256)}

	// The event loop, subscribed before any server starts so that it
	// misses nothing. The channel closes when the supervisor does.
	var loop sync.WaitGroup
	loop.Go(func() { h.watch(sup.Subscribe(ctx)) })
	defer func() {
		// Close shuts every server down; give it time even when ctx
		// was canceled (Ctrl-C). Then the event loop ends.
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		err = errors.Join(err, sup.Close(closeCtx))
		loop.Wait()
		out.printf("closed\n")
	}()

	res, err := sup.SetServers(ctx, cfg.Servers, mcpvisor.AwaitSettled(30*time.Second))
	if err != nil {
		return err
	}
	// Each block goes out in one piece: the event loop prints meanwhile.
	var b strings.Builder
	fmt.Fprintf(&b, "SetServers: added %v, settled %v\n", res.Added, res.Settled)
	for name, e := range res.Errors { // rejected configs; the others run
		fmt.Fprintf(&b, "  %s rejected: %v\n", name, e)
	}
	if len(res.Unsettled) > 0 { // still connecting when the wait ended; not an error
		fmt.Fprintf(&b, "  still connecting: %v\n", res.Unsettled)
	}
	for _, st := range sup.Status() {
		line := fmt.Sprintf("  %-8s %-6s %s %s %s", st.Name, st.State, st.Transport, st.ProtocolVersion, st.LastError)
		fmt.Fprintln(&b, strings.TrimRight(line, " "))
	}
	// Prompts are a host's slash commands, resources its attachments.
	prompts, _ := sup.Prompts().List("")
	resources, _, _ := sup.Resources().List("")
	fmt.Fprintf(&b, "prompts: %d, resources: %d\n", len(prompts), len(resources))

	// What the model is offered: built-ins first, then mcp__<server>__<tool>.
	b.WriteString("tools for the model:\n")
	for _, t := range modelTools(sup.Tools()) {
		line, _ := json.Marshal(t)
		fmt.Fprintf(&b, "  %s\n", line)
	}
	out.printf("%s", b.String())

	// The model's turns, scripted for the bundled config's servers. Each
	// call is routed by name; nothing here knows who answers it.
	if cfg.Servers["demo"].Command != exe || cfg.Servers["catalog"].Command != exe {
		out.printf("no bundled demo and catalog servers: no script\n")
		return nil
	}
	h.call(ctx, "Clock", `{}`)
	h.call(ctx, "Read", `{"path": "TODO.md"}`)
	h.call(ctx, "Read", `{"path": "../../../go.mod"}`) // outside the sandbox: a tool error
	h.call(ctx, "mcp__demo__add", `{"a": 2, "b": 40}`)
	h.call(ctx, "mcp__demo__fail", `{}`)                        // always a tool error (isError)
	h.call(ctx, "mcp__catalog__announce", `{}`)                 // denied by the config's tools filter: unknown
	h.call(ctx, "mcp__demo__announce", `{"text": "tool_late"}`) // the server adds a tool at run time
	// The server says its list changed; mcpvisor lists it again and
	// publishes the diff. The model sees the tool from its next turn on.
	if err := h.awaitDiff(ctx, "demo", func(d *mcpvisor.ListDiff) bool { return slices.Contains(d.Added, "mcp__demo__tool_late") }); err != nil {
		return err
	}
	h.call(ctx, "mcp__demo__tool_late", `{"text": "new on this turn"}`)

	// The user switches a server off for a while: its tools leave the
	// pool and calls to them are refused, but its connection stays up.
	if err := h.toggle(ctx, "catalog", false); err != nil {
		return err
	}
	h.call(ctx, "mcp__catalog__echo", `{"text": "anyone?"}`)
	if err := h.toggle(ctx, "catalog", true); err != nil {
		return err
	}
	h.call(ctx, "mcp__catalog__echo", `{"text": "back"}`)
	return nil
}

// builtins are the host's own tools. mcpvisor offers them first in the
// pool and routes CallTool to them; Call gets the model's arguments as is.
func builtins(sandbox *os.Root) []mcpvisor.BuiltinTool {
	return []mcpvisor.BuiltinTool{{
		Definition: protocol.Tool{
			Name:        "Read",
			Description: "Reads a text file of the project, by its path relative to the project directory.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		},
		Call: func(ctx context.Context, args json.RawMessage) (*protocol.CallToolResult, error) {
			var in struct {
				Path string `json:"path"`
			}
			if err := json.Unmarshal(args, &in); err != nil || in.Path == "" {
				return toolError("Read needs a path"), nil
			}
			data, err := sandbox.ReadFile(in.Path)
			if err != nil {
				return toolError(err.Error()), nil // the model sees why, and may try again
			}
			return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(string(data))}}, nil
		},
	}, {
		Definition: protocol.Tool{
			Name:        "Clock",
			Description: "Tells the current time (UTC, RFC 3339).",
			InputSchema: json.RawMessage(`{"type":"object"}`),
		},
		Call: func(context.Context, json.RawMessage) (*protocol.CallToolResult, error) {
			now := time.Now().UTC().Format(time.RFC3339)
			return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(now)}}, nil
		},
	}}
}

func toolError(msg string) *protocol.CallToolResult {
	return &protocol.CallToolResult{IsError: true, Content: []protocol.Content{protocol.TextContent(msg)}}
}

// modelTool is a tool definition as a model API takes it.
type modelTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func modelTools(pool []mcpvisor.Tool) []modelTool {
	tools := make([]modelTool, 0, len(pool))
	for _, t := range pool {
		// t.Name is what the model calls; t.Definition is the server's
		// own definition (Definition.Name is the server's name for it).
		tools = append(tools, modelTool{Name: t.Name, Description: t.Definition.Description, InputSchema: t.Definition.InputSchema})
	}
	return tools
}

// host routes the model's calls and follows the event stream.
type host struct {
	sup *mcpvisor.Supervisor
	out *printer
	// toolDiffs receives every tools_changed event after the event loop
	// printed it, for the script to wait on.
	toolDiffs chan *mcpvisor.ToolsChangedEvent
}

// call routes one tool call as the model emitted it and prints the outcome
// in the three shapes a host tells apart: a result, a result with isError
// (the tool ran and failed; the model should see it), and an error (the
// call did not complete: unknown tool, server off or not ready, timeout…).
func (h *host) call(ctx context.Context, name, args string) {
	h.out.printf("call %s %s\n", name, args)
	result, err := h.sup.CallTool(ctx, name, json.RawMessage(args))
	switch {
	case err != nil:
		h.out.printf("  error: %v\n", err)
	case result.IsError:
		h.out.printf("  tool error: %s\n", text(result))
	default:
		h.out.printf("  ok: %s\n", text(result))
	}
}

func text(res *protocol.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if c.Type == protocol.ContentText {
			parts = append(parts, strings.TrimSpace(c.Text))
		}
	}
	return strings.Join(parts, " ")
}

// awaitDiff waits until the event loop has printed a tools_changed event
// of server whose diff satisfies want. (A list_changed reaches the pool,
// then the event stream, shortly after the call that caused it returns.)
func (h *host) awaitDiff(ctx context.Context, server string, want func(*mcpvisor.ListDiff) bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		select {
		case ev := <-h.toolDiffs:
			if ev.Server == server && want(ev.Diff) {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("waiting for the tools of %s to change: %w", server, ctx.Err())
		}
	}
}

// toggle switches a server off or on, as a user would in the host's UI.
// The pool has changed when Toggle returns; waiting for the diff event
// only keeps this program's output in order.
func (h *host) toggle(ctx context.Context, server string, on bool) error {
	h.out.printf("toggle %s on=%v\n", server, on)
	if err := h.sup.Server(server).Toggle(ctx, on); err != nil {
		return err
	}
	return h.awaitDiff(ctx, server, func(d *mcpvisor.ListDiff) bool {
		return (on && len(d.Added) > 0) || (!on && len(d.Removed) > 0)
	})
}

// watch is the host's event loop: it prints every event and passes on the
// tool diffs. A host that falls behind is not waited for; it gets an
// EventGap saying how many events it lost.
func (h *host) watch(events <-chan mcpvisor.Event) {
	for ev := range events {
		h.out.printf("  event %s\n", describe(ev))
		if ev, ok := ev.(*mcpvisor.ToolsChangedEvent); ok {
			select {
			case h.toolDiffs <- ev:
			default: // nobody waits
			}
		}
	}
}

func describe(ev mcpvisor.Event) string {
	h := ev.Header()
	s := string(h.Type)
	if h.Server != "" {
		s += " " + h.Server
	}
	s += ":"
	diff := func(d *mcpvisor.ListDiff) {
		for i, names := range [][]string{d.Added, d.Removed, d.Changed} {
			for _, n := range names {
				s += " " + "+-~"[i:i+1] + n
			}
		}
	}
	switch ev := ev.(type) {
	case *mcpvisor.ServerStateEvent:
		s += " " + string(ev.State) + " " + ev.Err
	case *mcpvisor.ServerToggledEvent:
		s += fmt.Sprintf(" off=%v", ev.ToggledOff)
	case *mcpvisor.ToolsChangedEvent:
		diff(ev.Diff)
	case *mcpvisor.ListChangedEvent:
		diff(ev.Diff)
	case *mcpvisor.CollisionEvent:
		s += fmt.Sprintf(" %s/%s is offered as %s", ev.Collision.Server, ev.Collision.Original, ev.Collision.Renamed)
	case *mcpvisor.GapEvent:
		s += fmt.Sprintf(" lost %d events (%s); rebuild from Tools() and Status()", ev.Dropped, ev.GapReason)
	}
	return strings.TrimSpace(s)
}

// printer serializes the output of the model loop and the event loop.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, args...)
}

// bundledProjectOnly approves the entries of this example's own project
// folder (examples/agenthost/project, found from this source file), and
// nothing else.
type bundledProjectOnly struct{}

func (bundledProjectOnly) Approved(project, _, _ string) (approved, changed bool, err error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return false, false, nil
	}
	bundled, err := filepath.EvalSymlinks(filepath.Join(filepath.Dir(file), "project"))
	return err == nil && project == bundled, false, nil
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/config"
)

// listCmd is `mcpvisor list`: it starts a one-shot supervisor, waits for
// the servers to settle and prints them. It runs in cobra's goroutine.
type listCmd struct{ *app }

func (a listCmd) command() *cobra.Command {
	var (
		jsonOut bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Connect to every configured server and print its state and the tool pool",
		Long: `list starts every configured server, waits until each is ready, failed or
disabled (at most --timeout), prints the servers and the tool pool, and shuts the
servers down.

The tool count of a server is the number of its tools in the pool, after its
tools.allow/deny filter. Lazy servers are not connected (they stay pending) and,
like disabled servers, do not count against the exit code.

A config layer file (~/.mcp.json, ./.mcp.json, ./.mcp.local.json) that does not
load is left out: the other layers' servers are listed, and the file and its
problems are printed (and logged on stderr) without changing the exit code. A
file named with --config that does not load fails the command.

With --json, stdout is exactly one JSON object, even on failure:
  {"servers":[{"name","state","protocolVersion","tools","error"}],
   "tools":[{"name","server","tool","description","inputSchema","annotations"}],
   "skipped":[{"layer","file","errors"}]}
where tool is the server's own name for the tool and name the qualified one, and
skipped lists the config layer files left out, with their problems.

Exit codes:
  0  every enabled server is ready
  1  a server is not ready, or the config could not be loaded or was rejected
  2  usage error`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return usageError("--timeout must be positive")
			}
			return a.list(cmd.Context(), jsonOut, timeout)
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print one JSON object instead of tables")
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "how long to wait for the servers to connect")
	return cmd
}

// noArgs refuses positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError("%s takes no arguments, got %q", cmd.Name(), args)
	}
	return nil
}

func (a listCmd) list(ctx context.Context, jsonOut bool, timeout time.Duration) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	sup, err := a.startSupervisor(ctx, true)
	if err != nil {
		return failed(nil)
	}
	cfg, _, ok := a.configs.apply(ctx, sup)
	a.waitSettled(ctx, sup, timeout)
	statuses, tools := sup.Status(), sup.Tools()

	held := 0
	for _, st := range statuses {
		if st.State == mcpvisor.StateNeedsApproval {
			held++
		}
		if !decidesExit(st) {
			continue
		}
		if st.State != mcpvisor.StateReady {
			ok = false
		}
	}
	if held > 0 {
		a.log.Warn().Int("servers", held).Msg("servers of the project's config files need approval and were not started: run 'mcpvisor trust' (or --trust-project)")
	}

	var printErr error
	if jsonOut {
		printErr = printListJSON(a.stdout, statuses, tools, cfg.Skipped)
	} else {
		printErr = printListTables(a.stdout, statuses, tools, cfg.Skipped)
	}
	if printErr != nil {
		a.log.Error().Err(printErr).Msg("writing the list")
		ok = false
	}
	if a.closeSupervisor(sup) != nil {
		ok = false
	}
	if !ok {
		return failed(nil)
	}
	return nil
}

// decidesExit reports whether a server's state decides list's exit code:
// disabled servers and lazy servers that were not asked to connect do not.
func decidesExit(st mcpvisor.ServerStatus) bool {
	switch {
	case st.State == mcpvisor.StateDisabled:
		return false
	case st.Lazy && st.State == mcpvisor.StatePending:
		return false
	}
	return true
}

// waitSettled waits until no server is connecting, at most timeout, and
// logs why it stopped waiting otherwise.
func (a listCmd) waitSettled(ctx context.Context, sup *mcpvisor.Supervisor, timeout time.Duration) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stopReport := a.reportWaiting(sup)
	err := sup.WaitSettled(wctx)
	stopReport()
	if err != nil {
		switch {
		case ctx.Err() != nil:
			a.log.Warn().Msg("interrupted while the servers were connecting")
		case wctx.Err() != nil:
			a.log.Warn().Stringer("timeout", timeout).Msg("servers still connecting when the timeout passed")
		default:
			a.log.Warn().Err(err).Msg("waiting for the servers")
		}
	}
}

// poolCounts returns the number of pool tools per server.
func poolCounts(tools []mcpvisor.Tool) map[string]int {
	n := map[string]int{}
	for _, t := range tools {
		n[t.Server]++
	}
	return n
}

type listJSON struct {
	Servers []serverJSON  `json:"servers"`
	Tools   []toolJSON    `json:"tools"`
	Skipped []skippedJSON `json:"skipped"`
}

// skippedJSON is a config layer file the loader left out.
type skippedJSON struct {
	Layer  string   `json:"layer"`
	File   string   `json:"file"`
	Errors []string `json:"errors"`
}

// skippedErrors are the messages of sk's problems, without the file name
// (the file is beside them).
func skippedErrors(sk config.SkippedLayer) []string {
	out := make([]string, len(sk.Errors))
	for i, e := range sk.Errors {
		out[i] = strings.TrimPrefix(e.Error(), sk.File+": ")
	}
	return out
}

type serverJSON struct {
	Name            string `json:"name"`
	State           string `json:"state"`
	ProtocolVersion string `json:"protocolVersion"`
	Tools           int    `json:"tools"`
	Error           string `json:"error"`
}

type toolJSON struct {
	Name        string          `json:"name"`
	Server      string          `json:"server"`
	Tool        string          `json:"tool"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations json.RawMessage `json:"annotations"`
}

func printListJSON(w io.Writer, statuses []mcpvisor.ServerStatus, tools []mcpvisor.Tool, skipped []config.SkippedLayer) error {
	counts := poolCounts(tools)
	out := listJSON{Servers: []serverJSON{}, Tools: []toolJSON{}, Skipped: []skippedJSON{}}
	for _, sk := range skipped {
		out.Skipped = append(out.Skipped, skippedJSON{Layer: sk.Layer, File: sk.File, Errors: skippedErrors(sk)})
	}
	for _, st := range statuses {
		out.Servers = append(out.Servers, serverJSON{
			Name:            st.Name,
			State:           string(st.State),
			ProtocolVersion: st.ProtocolVersion,
			Tools:           counts[st.Name],
			Error:           st.LastError,
		})
	}
	for _, t := range tools {
		schema := t.Definition.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`) // as the protocol encodes a missing schema
		}
		ann, err := json.Marshal(t.Definition.Annotations)
		if err != nil {
			return fmt.Errorf("annotations of %s: %w", t.Name, err)
		}
		out.Tools = append(out.Tools, toolJSON{
			Name:        t.Name,
			Server:      t.Server,
			Tool:        t.Definition.Name,
			Description: t.Definition.Description,
			InputSchema: schema,
			Annotations: ann,
		})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func printListTables(w io.Writer, statuses []mcpvisor.ServerStatus, tools []mcpvisor.Tool, skipped []config.SkippedLayer) error {
	counts := poolCounts(tools)
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tSTATE\tTRANSPORT\tPROTOCOL\tTOOLS\tERROR")
	for _, st := range statuses {
		state := string(st.State)
		if st.Lazy && st.State == mcpvisor.StatePending {
			state += " (lazy)"
		}
		n := "-"
		if st.State == mcpvisor.StateReady {
			n = strconv.Itoa(counts[st.Name])
			if st.ToolCount != counts[st.Name] {
				n += " of " + strconv.Itoa(st.ToolCount) // filtered by tools.allow/deny
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", st.Name, state, orDash(st.Transport),
			orDash(st.ProtocolVersion), n, firstLine(st.LastError, 120))
	}
	tw.Flush()

	buf.WriteString("\n")
	if len(tools) == 0 {
		buf.WriteString("No tools.\n")
	} else {
		tw = tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOOL\tDESCRIPTION")
		for _, t := range tools {
			fmt.Fprintf(tw, "%s\t%s\n", t.Name, firstLine(t.Definition.Description, 100))
		}
		tw.Flush()
	}
	for _, sk := range skipped {
		fmt.Fprintf(&buf, "\nSkipped config file %s (%s layer): it does not load\n", sk.File, sk.Layer)
		for _, e := range skippedErrors(sk) {
			fmt.Fprintf(&buf, "  %s\n", firstLine(e, 200))
		}
	}
	// tabwriter pads the cells before an empty last column.
	for line := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// firstLine returns the first non-empty line of s, cut to at most limit
// runes.
func firstLine(s string, limit int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	s = strings.ReplaceAll(s, "\t", " ")
	if r := []rune(s); len(r) > limit {
		s = string(r[:limit-1]) + "…"
	}
	return s
}

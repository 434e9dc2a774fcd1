package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpvisor/mcpvisor/config"
	"github.com/mcpvisor/mcpvisor/trust"
)

// trustCmd is `mcpvisor trust`: it shows and approves held project
// servers and tool definitions. It runs in cobra's goroutine.
type trustCmd struct{ *app }

func (a trustCmd) command() *cobra.Command {
	var listOnly, asJSON, yes bool
	cmd := &cobra.Command{
		Use:   "trust [NAME...]",
		Short: "Show and approve what waits for your approval: project servers, changed tool definitions",
		Long: `trust shows what waits for your approval, and approves it:

  - servers of the project's config files (./.mcp.json, ./.mcp.local.json)
    whose entry you have not approved as written, in this directory: the entry
    as written, and every ${VAR} its expansion would read (the names, and
    whether each is set; never the values), and the sandbox it would run
    under (none, or the mechanism with its paths, network and memory limit);
  - tool definitions that changed since they were pinned, and tools that
    appeared on a server seen before: what changed, member by member.

For each it asks "approve? [y/N]" on stdin (a line starting with y approves).
--yes approves everything shown without asking; --list (or --json) only shows.
NAME... limits it to those servers. An approval covers the entry or the
definition shown: if it changes again, it needs approval again.

Approvals are kept in the state directory (--state-dir, $` + envStateDir + `, else
~/.local/state/mcpvisor; mode 0700, files 0600), never in the project. A running
'mcpvisor supervise' applies them on SIGHUP, or by itself with --watch.

Exit codes:
  0  nothing failed (whatever was approved or declined)
  1  the config could not be loaded, the state directory could not be read or
     written, or a NAME has nothing waiting
  2  usage error`,
		RunE: func(cmd *cobra.Command, names []string) error {
			return a.trust(cmd.Context(), names, listOnly || asJSON, asJSON, yes)
		},
	}
	cmd.Flags().BoolVar(&listOnly, "list", false, "only show what waits for approval")
	cmd.Flags().BoolVar(&asJSON, "json", false, "show it as one JSON object (implies --list)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "approve everything shown, without asking")
	return cmd
}

// trustJSON is what trust --json prints.
type trustJSON struct {
	Servers []pendingServerJSON `json:"servers"`
	Tools   []pendingToolJSON   `json:"tools"`
}

type pendingServerJSON struct {
	Name      string          `json:"name"`
	Layer     string          `json:"layer"`
	File      string          `json:"file"`
	Project   string          `json:"project"`
	Entry     json.RawMessage `json:"entry"`
	Hash      string          `json:"hash"`
	Variables []string        `json:"variables"`
	EnvFile   *envFileJSON    `json:"envFile,omitempty"`
	Sandbox   *sandboxJSON    `json:"sandbox"`
	Changed   bool            `json:"changed"`
	// LaunchChanges: what the entry launches that differs from what was
	// approved (its text being the one approved).
	LaunchChanges []string `json:"launchChanges,omitempty"`
	Reason        string   `json:"reason"`
}

// envFileJSON is a pending entry's envFile: its path and the names it
// sets (never the values).
type envFileJSON struct {
	Path      string   `json:"path"`
	Variables []string `json:"variables"`
}

type pendingToolJSON struct {
	Server     string          `json:"server"`
	Tool       string          `json:"tool"`
	Status     string          `json:"status"`
	Hash       string          `json:"hash"`
	Diff       string          `json:"diff"`
	Definition json.RawMessage `json:"definition"`
	Pinned     json.RawMessage `json:"pinned,omitempty"`
}

func (a trustCmd) trust(ctx context.Context, names []string, listOnly, asJSON, yes bool) error {
	if a.configs.trustProject {
		return usageError("--trust-project approves without recording; 'mcpvisor trust' records approvals: use one or the other")
	}
	store := a.state.trustStore()
	if store == nil {
		return failed(errors.New("no state directory to keep approvals in: set --state-dir or $" + envStateDir))
	}
	cfg, err := config.Load(config.Options{Files: a.configs.files, Approvals: store})
	if err != nil {
		a.configs.logError(err)
		return failed(nil)
	}
	tools, err := store.PendingTools()
	if err != nil {
		return failed(fmt.Errorf("reading the tool pins: %w", err))
	}
	servers := make([]config.PendingServer, 0, len(cfg.Pending))
	for _, name := range sortedNames(cfg.Pending) {
		servers = append(servers, cfg.Pending[name])
	}
	if len(names) > 0 {
		want := map[string]bool{}
		for _, n := range names {
			want[n] = true
		}
		servers = slices.DeleteFunc(servers, func(p config.PendingServer) bool { return !want[p.Name] })
		tools = slices.DeleteFunc(tools, func(p trust.PendingTool) bool { return !want[p.Server] })
		for _, n := range names {
			if !slices.ContainsFunc(servers, func(p config.PendingServer) bool { return p.Name == n }) &&
				!slices.ContainsFunc(tools, func(p trust.PendingTool) bool { return p.Server == n }) {
				return failed(fmt.Errorf("nothing of server %q waits for approval", n))
			}
		}
	}

	if asJSON {
		return a.printTrustJSON(servers, tools)
	}
	if len(servers) == 0 && len(tools) == 0 {
		fmt.Fprintln(a.stdout, "Nothing waits for approval.")
		return nil
	}
	answers := bufio.NewReader(a.stdin)
	approve := func(question string) bool {
		switch {
		case listOnly:
			return false
		case yes:
			fmt.Fprintf(a.stdout, "%s yes (--yes)\n\n", question)
			return true
		}
		fmt.Fprintf(a.stdout, "%s [y/N] ", question)
		line, _ := answers.ReadString('\n')
		fmt.Fprintln(a.stdout)
		return strings.HasPrefix(strings.ToLower(strings.TrimSpace(line)), "y")
	}
	approved, failures := 0, 0
	for _, p := range servers {
		a.printPendingServer(p)
		if !approve(fmt.Sprintf("Approve server %q for %s?", p.Name, p.Project)) {
			continue
		}
		approval, err := cfg.Approval(p.Name)
		if err != nil {
			a.log.Error().Err(err).Str("server", p.Name).Msg("approving")
			failures++
			continue
		}
		if err := store.Approve(ctx, approval); err != nil {
			a.log.Error().Err(err).Str("server", p.Name).Msg("recording the approval")
			failures++
			continue
		}
		approved++
	}
	for _, p := range tools {
		a.printPendingTool(p)
		if !approve(fmt.Sprintf("Approve this definition of %q?", p.Tool)) {
			continue
		}
		if err := store.ApproveTool(ctx, p); err != nil {
			a.log.Error().Err(err).Str("server", p.Server).Str("tool", p.Tool).Msg("recording the approval")
			failures++
			continue
		}
		approved++
	}
	if !listOnly {
		fmt.Fprintf(a.stdout, "Approved %d of %d. A running 'mcpvisor supervise' applies approvals on SIGHUP, or by itself with --watch.\n",
			approved, len(servers)+len(tools))
	}
	if failures > 0 {
		return failed(nil)
	}
	return nil
}

func (a trustCmd) printPendingServer(p config.PendingServer) {
	what := "not approved"
	if p.Changed {
		what = "changed since you approved it"
	}
	fmt.Fprintf(a.stdout, "Server %q from %s (%s layer): %s\n", p.Name, p.File, p.Layer, what)
	var entry bytes.Buffer
	if json.Indent(&entry, p.Entry, "  ", "  ") != nil {
		entry.Reset()
		entry.Write(p.Entry)
	}
	fmt.Fprintf(a.stdout, "  %s\n", entry.String())
	if len(p.Variables) == 0 {
		fmt.Fprintln(a.stdout, "  It expands no variable.")
	} else {
		vars := make([]string, len(p.Variables))
		for i, v := range p.Variables {
			state := "unset"
			if _, ok := os.LookupEnv(v); ok {
				state = "set"
			}
			vars[i] = fmt.Sprintf("%s (%s)", v, state)
		}
		fmt.Fprintf(a.stdout, "  It expands: %s\n", strings.Join(vars, ", "))
	}
	fmt.Fprintf(a.stdout, "  Sandbox: %s\n", describeSandbox(p))
	if p.EnvFile != "" {
		sets := "nothing"
		if len(p.EnvFileVariables) > 0 {
			sets = strings.Join(p.EnvFileVariables, ", ")
		}
		fmt.Fprintf(a.stdout, "  Its envFile %s sets: %s (approving covers the file as it is now)\n", p.EnvFile, sets)
	}
	if len(p.LaunchChanges) > 0 {
		fmt.Fprintln(a.stdout, "  The entry is the one you approved, but what it launches changed:")
		for _, l := range p.LaunchChanges {
			fmt.Fprintf(a.stdout, "    %s\n", l)
		}
	}
}

func (a trustCmd) printPendingTool(p trust.PendingTool) {
	what := "changed since it was pinned"
	if p.Status == trust.StatusNew {
		what = "new on a server seen before"
	}
	fmt.Fprintf(a.stdout, "Tool %q of server %q: %s\n", p.Tool, p.Server, what)
	for line := range strings.Lines(p.Diff) {
		fmt.Fprintf(a.stdout, "  %s", line)
	}
}

func (a trustCmd) printTrustJSON(servers []config.PendingServer, tools []trust.PendingTool) error {
	out := trustJSON{Servers: []pendingServerJSON{}, Tools: []pendingToolJSON{}}
	for _, p := range servers {
		vars := p.Variables
		if vars == nil {
			vars = []string{}
		}
		ps := pendingServerJSON{Name: p.Name, Layer: p.Layer, File: p.File, Project: p.Project,
			Entry: p.Entry, Hash: p.Hash, Variables: vars, Sandbox: pendingSandbox(p), Changed: p.Changed, LaunchChanges: p.LaunchChanges, Reason: p.Reason}
		if p.EnvFile != "" {
			ps.EnvFile = &envFileJSON{Path: p.EnvFile, Variables: append([]string{}, p.EnvFileVariables...)}
		}
		out.Servers = append(out.Servers, ps)
	}
	for _, p := range tools {
		out.Tools = append(out.Tools, pendingToolJSON{Server: p.Server, Tool: p.Tool, Status: string(p.Status), Hash: p.Hash,
			Diff: p.Diff, Definition: p.Definition, Pinned: p.Pinned})
	}
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return writeOrFail(enc.Encode(out))
}

func writeOrFail(err error) error {
	if err != nil {
		return failed(fmt.Errorf("writing the output: %w", err))
	}
	return nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

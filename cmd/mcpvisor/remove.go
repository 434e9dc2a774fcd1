package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpvisor/mcpvisor/cmd/mcpvisor/internal/mcpfile"
)

// removeCmd is `mcpvisor remove`: it deletes a server entry from a config
// file. It runs in cobra's goroutine.
type removeCmd struct{ *app }

func (a removeCmd) command() *cobra.Command {
	var scope string
	cmd := &cobra.Command{
		Use:   "remove [--scope local|project|user] NAME",
		Short: "Remove a server from a config file, as `claude mcp remove` does",
		Long: `remove deletes a server's entry from one config file, as 'claude mcp remove'
does. Without --scope it looks in every file (with --config: the files named;
else ~/.mcp.json, ./.mcp.json and ./.mcp.local.json) and removes the entry from
the one file that has it; when several have it, it removes nothing and lists
them: name one with --scope. With --scope it removes the entry of that file.

The file is edited in place, atomically, and keeps every other byte; removing
its last server leaves an empty map. Approvals recorded for the entry stay in
the state directory (they cover that entry as written, nowhere else).

Exit codes:
  0  removed
  1  no such server (in that scope), several scopes have it, or the file
     cannot be read or written
  2  usage error`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.remove(cmd.Context(), scope, args[0])
		},
	}
	cmd.Flags().StringVarP(&scope, "scope", "s", "", "`SCOPE` to remove from: local, project or user; default: the one scope that has it")
	return cmd
}

func (a removeCmd) remove(ctx context.Context, scope, name string) error {
	scopes, err := a.configs.editableScopes()
	if err != nil {
		return failed(err)
	}
	defs, unreadable := a.configs.definitionsOf(name, scopes)
	var s scopeFile
	if scope != "" || len(a.configs.files) == 1 {
		if s, err = a.configs.scopeByName(scope); err != nil {
			return err
		}
	} else {
		switch len(defs) {
		case 0:
			if m, ok := managedScope(); ok {
				if mdefs, _ := a.configs.definitionsOf(name, []scopeFile{m}); len(mdefs) > 0 {
					return failed(fmt.Errorf("MCP server %q is defined in the managed file %s, which mcpvisor does not edit", name, m.path))
				}
			}
			return failed(fmt.Errorf("no MCP server named %q in:%s%s", name, describeScopes(scopes), unreadableNote(unreadable)))
		case 1:
			s = defs[0].scopeFile
		default:
			var in []scopeFile
			for _, d := range defs {
				in = append(in, d.scopeFile)
			}
			how := "mcpvisor remove " + name + " --scope SCOPE"
			if len(a.configs.files) > 0 {
				how = "mcpvisor --config FILE remove " + name
			}
			return failed(fmt.Errorf("MCP server %q is defined in several scopes:%s\nnothing was removed; remove it from one with: %s", name, describeScopes(in), how))
		}
	}

	written, _, err := a.configs.edit(ctx, s, func(f *mcpfile.File) ([]byte, error) { return f.Remove(name) })
	if errors.Is(err, mcpfile.ErrNotFound) {
		var elsewhere []scopeFile
		for _, d := range defs {
			if !samePath(d.path, s.path) {
				elsewhere = append(elsewhere, d.scopeFile)
			}
		}
		msg := fmt.Sprintf("no MCP server named %q in the %s config (%s)", name, s.scope, s.path)
		if len(elsewhere) > 0 {
			msg += "; it is defined in:" + describeScopes(elsewhere)
		}
		return failed(errors.New(msg))
	}
	if err != nil {
		return failed(fmt.Errorf("%s: %w", s.path, err))
	}
	fmt.Fprintf(a.stdout, "Removed MCP server %q from the %s config\n", name, s.scope)
	fmt.Fprintf(a.stdout, "File modified: %s\n", written)
	for _, d := range defs {
		if !samePath(d.path, s.path) {
			fmt.Fprintf(a.stdout, "It is still defined in the %s config (%s).\n", d.scope, d.path)
		}
	}
	return nil
}

// unreadableNote mentions the files whose servers could not be seen.
func unreadableNote(files []scopeFile) string {
	if len(files) == 0 {
		return ""
	}
	var names []string
	for _, f := range files {
		names = append(names, f.path)
	}
	return "\n(" + strings.Join(names, ", ") + " could not be read: see the log)"
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mcpvisor/mcpvisor/bench/mockserver"
)

func mockHelp() string {
	var b strings.Builder
	b.WriteString(`mock runs the bundled mock MCP server (bench/mockserver) over stdin and stdout,
speaking every protocol version mcpvisor does. It serves the tools echo, add, fail
(always isError), sleep and announce (adds a tool and sends list_changed), plus
what the flags ask for, and can misbehave on purpose. Use it as a server's
command in a config file: "command": "mcpvisor", "args": ["mock", "--latency", "50ms"].

With --transport http, sse or ws it listens instead (Streamable HTTP at /mcp,
HTTP+SSE at /sse, WebSocket at /ws), prints one line MCPVISOR_MOCK_URL=<url> on
stderr, and serves until SIGTERM, SIGINT or the end of stdin (keep stdin open).

Usage:
  mcpvisor mock [flags]

Flags (a single dash, -latency, works too):
`)
	b.WriteString(mockFlagUsages())
	b.WriteString(`
Exit codes:
  0  stdin ended (or, over HTTP, SIGTERM or SIGINT)
  1  cannot listen
  2  bad flag
  3  --exit-after reached
  4  --exit-at-start
  5  --crash-mid-response (a tools/call crashed it)
  6  --flap-up period over (stdio)
`)
	return b.String()
}

// mockFlagUsages lays out the mock server's flags as cobra does every
// other command's (--name TYPE, the usage aligned in a column), with the
// flags its usages name written with two dashes as well.
func mockFlagUsages() string {
	goFlags := mockserver.FlagSet()
	fs := pflag.NewFlagSet("mock", pflag.ContinueOnError)
	fs.AddGoFlagSet(goFlags)
	fs.VisitAll(func(f *pflag.Flag) {
		if f.DefValue == "0s" { // pflag does not see a Go flag's zero duration as zero
			f.DefValue = "0"
		}
	})
	var names []string
	goFlags.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	// Longest first, so that -flap-up is not taken for -flap.
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	out := fs.FlagUsages()
	for _, n := range names {
		for _, before := range []string{" ", "("} {
			out = strings.ReplaceAll(out, before+"-"+n, before+"\x00"+n)
		}
	}
	return strings.ReplaceAll(out, "\x00", "--")
}

// mockCmd is `mcpvisor mock`.
type mockCmd struct{ *app }

func (a mockCmd) command() *cobra.Command {
	cmd := &cobra.Command{
		Use:                "mock [flags]",
		Short:              "Run the bundled mock MCP server (stdio, HTTP, SSE or WebSocket)",
		Long:               mockHelp(),
		DisableFlagParsing: true, // the flags are the mock server's own
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := mockserver.ParseFlags(args); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return cmd.Help()
				}
				return usageError("mock: %v", err)
			}
			if code := mockserver.Main(args); code != exitOK {
				return &exitError{code: code}
			}
			return nil
		},
	}
	cmd.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		fmt.Fprint(cmd.OutOrStdout(), cmd.Long)
	})
	return cmd
}

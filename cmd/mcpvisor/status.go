package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/gateway"
)

// version is the module version the binary was built from ("dev" for a
// build from a work tree).
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// statusCmd is `mcpvisor status`: it prints a running supervise's
// /status. It runs in cobra's goroutine.
type statusCmd struct{ *app }

func (a statusCmd) command() *cobra.Command {
	var url, tokenFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the servers of a running `mcpvisor supervise` (its GET /status)",
		Long: `status asks a running 'mcpvisor supervise' for its servers (GET /status on its
listener) and prints a table: status (connected, failed, needs-auth, pending,
disabled, or excluded: kept from running by a managed policy, with the reason), scope (the config layer), detailed state, tools offered (marked deferred for a server with "defer": true),
tokens (the estimated tokens of the server's tool definitions: their JSON bytes
/ 4), requests in flight, strikes,
reconnect attempt and next retry, latency p50/p99, and the last error with its
class. --json prints the JSON document as served.

Exit codes:
  0  the supervisor answered
  1  it could not be reached or refused the request
  2  usage error`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.status(cmd.Context(), url, tokenFile, asJSON)
		},
	}
	cmd.Flags().StringVar(&url, "url", "http://"+DefaultListen, "the supervisor's listener `URL`")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "send the bearer token in `FILE`")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the JSON status document")
	return cmd
}

func (a statusCmd) status(ctx context.Context, url, tokenFile string, asJSON bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/status", nil)
	if err != nil {
		return usageError("--url: %v", err)
	}
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return usageError("--token-file: %v", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return failed(fmt.Errorf("no supervisor at %s: %w", url, err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return failed(fmt.Errorf("reading the status: %w", err))
	}
	if resp.StatusCode != http.StatusOK {
		return failed(fmt.Errorf("%s/status: %s: %s", url, resp.Status, strings.TrimSpace(string(body))))
	}
	if asJSON {
		_, err := a.stdout.Write(body)
		return err
	}
	var rep gateway.StatusReport
	if err := json.Unmarshal(body, &rep); err != nil {
		return failed(fmt.Errorf("decoding the status: %w", err))
	}
	fmt.Fprintf(a.stdout, "mcpvisor %s, up %s, %d tools (~%d tokens of definitions, tools/list: %s), %d sessions, %d requests in flight\n\n",
		rep.Version, time.Since(rep.Started).Truncate(time.Second), rep.Tools, rep.ToolTokens, rep.ToolMode, rep.Sessions, rep.InFlight)
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tSTATUS\tSCOPE\tSTATE\tTOOLS\tTOKENS\tIN-FLIGHT\tSTRIKES\tATTEMPT\tNEXT RETRY\tCALLS\tP50\tP99\tLAST ERROR")
	for _, s := range rep.Servers {
		next := "-"
		if !s.NextRetry.IsZero() {
			next = time.Until(s.NextRetry).Truncate(time.Millisecond).String()
		}
		lastErr := "-"
		if s.LastError != "" {
			class := s.LastErrorClass
			if f := s.LastFailure; f == mcpvisor.FailureSandbox || f == mcpvisor.FailureResourceLimit {
				class = string(f)
			}
			lastErr = "[" + class + "] " + firstLine(s.LastError, 100)
		} else if len(s.ListErrors) > 0 {
			le := s.ListErrors[0]
			lastErr = "[list " + le.List + "] " + firstLine(le.Error, 100)
		}
		state := string(s.State)
		if s.Sandbox != "" {
			state += " (" + string(s.Sandbox) + ")"
		}
		if s.ToggledOff {
			state += " (off)"
		}
		tools := strconv.Itoa(s.OfferedTools)
		if n := len(s.WithheldTools); n > 0 {
			tools += fmt.Sprintf(" (%d withheld)", n)
		}
		if s.Deferred {
			tools += " (deferred)"
		}
		scope := s.Scope
		if scope == "" {
			scope = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t~%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t%s\n", s.Name, s.Status, scope, state, tools, s.ToolTokens, s.InFlight,
			s.Strikes, s.Attempt, next, s.Latency.Calls, ms(s.LatencyP50Ms, s.Latency.Calls), ms(s.LatencyP99Ms, s.Latency.Calls), lastErr)
	}
	for _, x := range rep.Excluded {
		fmt.Fprintf(tw, "%s\texcluded\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t[policy] %s\n", x.Name, firstLine(x.Reason, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, sk := range rep.Skipped {
		fmt.Fprintf(a.stdout, "\nSkipped config file %s (%s layer): it does not load\n", sk.File, sk.Layer)
		for _, e := range sk.Errors {
			fmt.Fprintf(a.stdout, "  %s\n", e)
		}
	}
	return nil
}

func ms(v float64, n uint64) string {
	if n == 0 {
		return "-"
	}
	if v < 1 {
		return fmt.Sprintf("≤%.0fµs", v*1000)
	}
	return fmt.Sprintf("≤%gms", v)
}

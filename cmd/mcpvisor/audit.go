package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpvisor/mcpvisor/audit"
)

// auditFlags are supervise's --audit flags.
type auditFlags struct {
	path      string // --audit FILE, or "-" for stdout
	maxSize   int64
	keep      int
	arguments bool
	results   bool
}

func (f *auditFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.path, "audit", "", "write an audit trail (one hash-chained JSON line per call, read, prompt, approval, admin action and refused request) to `FILE`, or - for stdout (docs/audit.md)")
	fl.Int64Var(&f.maxSize, "audit-max-size", audit.DefaultMaxSize, "rotate the --audit file when it would grow past `BYTES` (FILE.1, FILE.2, …); negative: never")
	fl.IntVar(&f.keep, "audit-keep", audit.DefaultKeep, "keep `N` rotated --audit files")
	fl.BoolVar(&f.arguments, "audit-arguments", false, "also write each call's arguments into the audit trail, redacted (values under secret-looking names, credentials, URL user info and query values)")
	fl.BoolVar(&f.results, "audit-results", false, "also write each call's result into the audit trail, redacted like the arguments")
}

// check refuses what the flags cannot do, before anything starts.
func (f *auditFlags) check(stdio bool) error {
	switch {
	case f.path == "" && (f.arguments || f.results):
		return usageError("--audit-arguments and --audit-results need --audit")
	case f.path != "" && f.keep <= 0:
		return usageError("--audit-keep %d: want at least 1", f.keep)
	case f.path == "-" && stdio:
		return usageError("--audit - writes to stdout, which --stdio serves MCP on: give a file")
	}
	return nil
}

// open opens the trail the flags ask for (nil without --audit); member
// names the cluster member in every line. The flags are checked.
func (f *auditFlags) open(a *app, member string) (*audit.Writer, error) {
	if f.path == "" {
		return nil, nil
	}
	o := audit.Options{Path: f.path, MaxSize: f.maxSize, Keep: f.keep, Arguments: f.arguments, Results: f.results,
		Member: member, Logger: a.log}
	if f.path == "-" {
		o.Path, o.Output = "", a.stdout
	}
	w, err := audit.New(o)
	if err != nil {
		a.log.Error().Err(err).Msg("opening the audit trail")
		return nil, err
	}
	return w, nil
}

// closeAudit writes what the trail has queued and closes it.
func (a *superviseCmd) closeAudit(w *audit.Writer) {
	if w == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		a.log.Error().Err(err).Msg("closing the audit trail")
	}
	st := w.Stats()
	a.log.Info().Uint64("lines", st.Lines).Uint64("dropped", st.Dropped).Uint64("seq", st.Seq).Msg("audit trail closed")
}

// auditCmd is `mcpvisor audit`: it verifies audit trails. It runs in
// cobra's goroutine.
type auditCmd struct{ *app }

func (a auditCmd) command() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Work with the audit trail of `mcpvisor supervise --audit`",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError("audit: want a subcommand (verify)")
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "verify FILE...",
		Short: "Check that an audit trail's hash chain is intact",
		Long: `verify reads the trail files given, oldest first (FILE.3 FILE.2 FILE.1 FILE), and
checks the chain: every line decodes, its seq is one more than the line before,
its prev is the SHA-256 of the line before (across files too), the trail's
first line chains to genesis, and no file ends in a partial line. It prints OK
with the number of lines, or the first line that breaks the chain (file, line
number, seq, what was found): a line edited, removed, reordered, or a file cut
off. A first file that goes on from an older file not given (rotated away) is
reported, not refused. Lines removed from the very end of the newest file leave
no trace in the chain: compare the last seq printed with mcpvisor_audit_seq in
/metrics, or with the last hash kept elsewhere.

Exit codes:
  0  the chain is intact
  1  it breaks, or a file cannot be read
  2  usage error`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			return a.verify(files)
		},
	})
	return cmd
}

func (a auditCmd) verify(files []string) error {
	rep, err := audit.Verify(files...)
	var be *audit.BreakError
	if errors.As(err, &be) {
		fmt.Fprintf(a.stdout, "BROKEN %s line %d", be.File, be.Line)
		if be.Seq != 0 {
			fmt.Fprintf(a.stdout, " (seq %d)", be.Seq)
		}
		fmt.Fprintf(a.stdout, ": %v: %s\n", errors.Unwrap(be), be.Detail)
		return failed(nil)
	}
	if err != nil {
		return failed(err)
	}
	from := "from genesis"
	if !rep.FromGenesis {
		from = fmt.Sprintf("going on from seq %d of an older file not given", rep.FirstSeq-1)
	}
	if rep.Lines == 0 {
		fmt.Fprintf(a.stdout, "OK 0 lines in %d file(s)\n", rep.Files)
		return nil
	}
	fmt.Fprintf(a.stdout, "OK %d lines in %d file(s), seq %d..%d, %s; last hash %s\n",
		rep.Lines, rep.Files, rep.FirstSeq, rep.LastSeq, from, rep.LastHash)
	return nil
}

// Command mcpvisor supervises the MCP servers of an .mcp.json
// configuration: it lists them, calls their tools, keeps them connected,
// and runs the bundled mock server.
//
// Results go to stdout; logs and errors go to stderr. Exit codes: 0
// success, 1 failure (a server not ready, a failed call, a config error),
// 2 usage error (bad flags or arguments). `mcpvisor mock` exits with the
// mock server's own codes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/mockserver"
	"github.com/mcpvisor/mcpvisor/config"
	"github.com/mcpvisor/mcpvisor/gateway"
	"github.com/mcpvisor/mcpvisor/oauth/secretstore"
	"github.com/mcpvisor/mcpvisor/protocol"
	"github.com/mcpvisor/mcpvisor/toolcache"
)

func main() {
	// When the supervisor re-executes this binary as its process helper
	// (the reaper of stdio servers, or a sandbox's exec stage), that is
	// all it does.
	mcpvisor.HelperMain()
	// The supervisor starts mock servers (and their grandchildren) by
	// re-executing the binary with mockserver.EnvRole set: serve them
	// before anything else.
	if mockserver.IsRequested() {
		os.Exit(mockserver.Main(os.Args[1:]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

const exitCodesHelp = `Exit codes:
  0  success
  1  failure: a server not ready, a failed or unknown call, a config error
  2  usage error: unknown command, bad flag or argument
'mcpvisor mock' exits with the mock server's own codes (see 'mcpvisor mock -h').`

// closeTimeout bounds Supervisor.Close in every command. The stdio
// shutdown ladder (close stdin, SIGTERM, SIGKILL, 2 s waits) runs for all
// servers at once, so this is generous.
const closeTimeout = 30 * time.Second

// exitError ends a command with an exit code. Every RunE returns either
// nil or an *exitError; any other error comes from cobra itself (unknown
// command, bad flag, wrong arguments) and is a usage error.
type exitError struct {
	code int
	err  error // printed to stderr when not nil; nil when already reported
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

// failed ends a command with exit code 1; err has already been reported
// when nil.
func failed(err error) error { return &exitError{code: exitFailure, err: err} }

// usageError ends a command with exit code 2.
func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// app holds what every command shares, in parts with one job each: the
// output streams and loggers (output, embedded: every command prints and
// logs), the state directory, the config files and the OAuth token store.
// Each subcommand is a small type that embeds *app (listCmd, callCmd,
// superviseCmd, ...) and holds what only it needs.
//
// Concurrency: the CLI is single-goroutine. cobra's goroutine builds the
// commands, parses the flags into the parts, sets up the loggers
// (PersistentPreRunE) and runs one command; only that goroutine changes
// any part. Goroutines a command starts (supervise's event log and config
// watch, the login URL opener the library calls) only read the loggers
// and streams, which no longer change by then.
type app struct {
	output
	state   *stateDir    // --state-dir: approvals, tool pins, edit locks, discovery cache
	configs *configFiles // --config, --trust-project: loading and editing the .mcp.json files
	tokens  *tokenStore  // --token-store: the OAuth token store, opened once
	etcd    etcdFlags    // --etcd-*: the etcd of --token-store etcd and --session-store etcd
}

// newApp returns the app of one command line, writing to stdout and
// stderr, logging nowhere until setUpLogging.
func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	a := &app{output: output{stdin: stdin, stdout: stdout, stderr: stderr, log: zerolog.Nop(), libLog: zerolog.Nop()}}
	a.state = &stateDir{out: &a.output}
	a.configs = &configFiles{state: a.state, out: &a.output}
	a.tokens = &tokenStore{etcd: &a.etcd, out: &a.output}
	return a
}

// output is the command's streams and the loggers built from the global
// flags: results go to stdout, logs and errors to stderr. The fields are
// set before any command runs (setUpLogging, in cobra's goroutine) and
// only read afterwards.
type output struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	logLevel  string // --log-level
	logFormat string // --log-format: auto, text or json

	log    zerolog.Logger // the CLI's own logger
	libLog zerolog.Logger // the logger handed to the supervisor
}

// run executes the command line args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	// The CLI owns the process: its logs carry milliseconds.
	zerolog.TimeFieldFormat = "2006-01-02T15:04:05.000Z07:00"
	a := newApp(os.Stdin, stdout, stderr)
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(context.Background())
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		ee = &exitError{code: exitUsage, err: err} // cobra's own: unknown command, bad flag or arguments
	}
	if ee.err != nil {
		hint := ""
		if ee.code == exitUsage {
			if cmd == nil {
				cmd = root
			}
			hint = fmt.Sprintf("Run '%s --help' for usage.", cmd.CommandPath())
		}
		a.reportError(ee.err, ee.code, hint)
	}
	return ee.code
}

// reportError writes the error that ends the process to stderr, in the
// stream's one format: a JSON log line (level error, with the exit code
// and the usage hint) when the logs are JSON, else the plain sentence
// "mcpvisor: <err>" and the hint on its own line. It is written whatever
// --log-level says: it is the command's answer.
func (o *output) reportError(err error, code int, hint string) {
	if o.jsonLogs() {
		l := zerolog.New(o.stderr).With().Timestamp().Logger()
		ev := l.WithLevel(zerolog.ErrorLevel).Int("exit_code", code)
		if hint != "" {
			ev = ev.Str("hint", hint)
		}
		ev.Msg(err.Error())
		return
	}
	fmt.Fprintf(o.stderr, "mcpvisor: %v\n", err)
	if hint != "" {
		fmt.Fprintln(o.stderr, hint)
	}
}

// Log formats (--log-format).
const (
	logFormatAuto = "auto" // text on a terminal, JSON otherwise
	logFormatText = "text" // zerolog's console writer
	logFormatJSON = "json" // one JSON object a line
)

// jsonLogs reports whether stderr carries JSON lines: --log-format json,
// or auto (also an unparsable value, for the final error of a bad flag)
// with stderr not a terminal.
func (o *output) jsonLogs() bool {
	switch strings.ToLower(strings.TrimSpace(o.logFormat)) {
	case logFormatJSON:
		return true
	case logFormatText:
		return false
	}
	return !isTerminal(o.stderr)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "mcpvisor",
		Short: "Keep MCP servers connected: list them, call their tools, supervise them",
		Long: `mcpvisor keeps an agent host connected to every MCP server in its configuration:
it starts them, speaks their protocol era, notices failure, and reports what changed.

Servers come from .mcp.json files. With --config (repeatable; later files win per
server name) exactly those files are read. Without it the layers are read, lowest
precedence first: ~/.mcp.json, ./.mcp.json, ./.mcp.local.json; when the managed
file ` + config.DefaultManagedFile + ` exists it is the only file read.

The servers of ./.mcp.json and ./.mcp.local.json (the project's files, which
whoever can write to the project chose) are not started until you approve each
entry as written, in this directory: they show as needs-approval. 'mcpvisor
trust' shows them and approves them; --trust-project approves them all for one
run. Tool definitions are pinned when a server is first seen; a changed
definition, or a new tool, is withheld until approved ('mcpvisor trust'), except
on servers marked "trust": "trusted". Decisions are kept in --state-dir.

Results go to stdout; logs and errors go to stderr, in one format: --log-format
auto (the default) is plain text on a terminal and JSON lines otherwise, where
the error that ends the command is a JSON line too.

` + exitCodesHelp,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.setUpLogging()
		},
	}
	root.PersistentFlags().StringArrayVar(&a.configs.files, "config", nil,
		"config `FILE` to load (repeatable; later files win per server name); default: layered discovery")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "info",
		"log `LEVEL`: trace, debug, info, warn, error or disabled")
	root.PersistentFlags().StringVar(&a.logFormat, "log-format", logFormatAuto,
		"log `FORMAT` on stderr: auto (text on a terminal, else json), text or json; errors follow it")
	root.PersistentFlags().StringVar(&a.state.dir, "state-dir", "",
		"keep approvals and tool pins in `DIR` (default $"+envStateDir+", else ~/.local/state/mcpvisor)")
	root.PersistentFlags().BoolVar(&a.configs.trustProject, "trust-project", false,
		"start the servers of the project's config files without approval, for this run (nothing is recorded)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: err}
	})
	root.CompletionOptions.DisableDefaultCmd = true

	// Each subcommand is a small type that embeds a and holds what only
	// it needs.
	list, call, supervise, auth := listCmd{a}.command(), callCmd{a}.command(), (&superviseCmd{app: a}).command(), authCmd{a}.command()
	// --token-store and --etcd-* only where they are used: the commands
	// that open the OAuth token store (--token-store etcd), among them
	// supervise (also --session-store etcd, --cluster-membership etcd).
	for _, c := range []*cobra.Command{list, call, supervise, auth} {
		c.PersistentFlags().StringVar(&a.tokens.backend, "token-store", "",
			"where OAuth tokens are kept: `STORE` auto, file, "+strings.Join(secretstore.Names()[2:], ", ")+", etcd (shared by a deployment: --etcd-endpoint)"+
				" (default $"+envTokenStoreBackend+", else auto: the OS secret store where one works)")
		a.etcd.register(c.PersistentFlags())
	}
	root.AddCommand(list, call, supervise, statusCmd{a}.command(), mockCmd{a}.command(), conformanceCmd{a}.command(),
		benchCmd{a}.command(), auth, trustCmd{a}.command(), addCmd{a}.command(), removeCmd{a}.command(),
		getCmd{a}.command(), auditCmd{a}.command())
	return root
}

// setUpLogging builds the loggers from --log-level and --log-format. The
// CLI logs to stderr: with --log-format auto, console format on a
// terminal, JSON lines otherwise.
//
// The supervisor gets the same logger, except at level info, where it
// gets warn: its info messages are state changes, which the commands
// report themselves (supervise logs every event; list and call print the
// states), and protoactor's lifecycle chatter. --log-level debug shows
// them all.
func (o *output) setUpLogging() error {
	level, err := zerolog.ParseLevel(strings.ToLower(strings.TrimSpace(o.logLevel)))
	if err != nil || o.logLevel == "" || level == zerolog.NoLevel {
		return usageError("--log-level %q: want trace, debug, info, warn, error or disabled", o.logLevel)
	}
	switch f := strings.ToLower(strings.TrimSpace(o.logFormat)); f {
	case logFormatAuto, logFormatText, logFormatJSON:
		o.logFormat = f
	default:
		o.logFormat = logFormatAuto // the error below is reported in auto's format
		return usageError("--log-format %q: want auto, text or json", f)
	}
	out := o.stderr
	if !o.jsonLogs() {
		out = zerolog.ConsoleWriter{Out: o.stderr, TimeFormat: "15:04:05.000", NoColor: !isTerminal(o.stderr)}
	}
	o.log = zerolog.New(out).Level(level).With().Timestamp().Logger()
	o.libLog = o.log
	if level == zerolog.InfoLevel {
		o.libLog = o.log.Level(zerolog.WarnLevel)
	}
	return nil
}

// load reads the --config files, or the layered configuration
// when there are none, with the approvals of the state directory (or,
// with --trust-project, approving every entry). A layer file that does
// not load is left out with a warning on the log (a --config file that
// does not load fails instead).
func (c *configFiles) load() (*config.Config, error) {
	opts := config.Options{Files: c.files}
	switch {
	case c.trustProject:
		opts.Approvals = approveEverything{}
	case c.state.trustStore() != nil:
		opts.Approvals = c.state.trustStore()
	}
	cfg, err := config.Load(opts)
	if err == nil {
		c.warnSkipped(cfg)
	}
	return cfg, err
}

// warnSkipped logs each problem of each config layer the loader left out.
func (c *configFiles) warnSkipped(cfg *config.Config) {
	for _, sk := range cfg.Skipped {
		for _, e := range sk.Errors {
			c.out.log.Warn().Str("layer", sk.Layer).Str("file", sk.File).Err(e).Msg("config file skipped: it does not load; its servers are not started")
		}
	}
}

// logError logs each problem a config load reported on its own line.
func (c *configFiles) logError(err error) {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		c.out.log.Error().Err(e).Msg("config error")
	}
}

// apply loads the configuration and gives it to sup. It reports
// every problem (unloadable files, rejected servers) on the log and
// returns false when there was any. A config that fails to load gives sup
// no servers.
func (c *configFiles) apply(ctx context.Context, sup *mcpvisor.Supervisor) (*config.Config, mcpvisor.SetResult, bool) {
	ok := true
	cfg, err := c.load()
	if err != nil {
		c.logError(err)
		ok = false
		cfg = &config.Config{Servers: map[string]mcpvisor.ServerConfig{}, Sources: map[string]string{}}
	}
	if err := sup.SetPermissions(cfg.Permissions); err != nil { // validated by the loader: cannot fail
		c.out.log.Error().Err(err).Msg("permission rules")
		return cfg, mcpvisor.SetResult{}, false
	}
	res, err := sup.SetServers(ctx, cfg.Servers)
	if err != nil {
		c.out.log.Error().Err(err).Msg("configuring the supervisor")
		return cfg, res, false
	}
	for _, name := range slices.Sorted(maps.Keys(res.Errors)) {
		c.out.log.Error().Str("server", name).Err(res.Errors[name]).Msg("server config rejected")
		ok = false
	}
	return cfg, res, ok
}

// startSupervisor starts a supervisor that logs through the library
// logger. A one-shot command's supervisor does not reconnect: it reports
// each server as it finds it.
func (a *app) startSupervisor(ctx context.Context, oneShot bool, configure ...func(*mcpvisor.Options)) (*mcpvisor.Supervisor, error) {
	oo, err := a.tokens.oauthOptions(ctx)
	if err != nil {
		a.log.Error().Err(err).Msg("opening the OAuth token store")
		return nil, err
	}
	if !oneShot {
		a.tokens.logWhere()
	}
	opts := mcpvisor.Options{Logger: a.libLog, OAuth: oo}
	// One identity towards servers: every command presents the client
	// capabilities supervise's gateway does, so that a server offers
	// list, call and supervise the same tools and one set of pins holds
	// for all three. Without a client behind it (list, call), a server's
	// request is answered with an error; supervise's Forwarder routes
	// them to its clients.
	opts.Capabilities = gateway.ClientCapabilities()
	opts.Requests = noClientToAnswer
	// Landlock's private temporary directories go to the runtime
	// directory when it is a private tmpfs (the library reads no
	// environment variable; empty means /run/user/<uid>).
	opts.Sandbox.RuntimeDir = os.Getenv("XDG_RUNTIME_DIR")
	if store := a.state.trustStore(); store != nil {
		opts.ToolPins.Store = store
	}
	if dir, err := a.state.path(); err == nil {
		// Lazy servers' tools, from their last connect, are offered
		// before their first use.
		opts.DiscoveryCache = toolcache.New(filepath.Join(dir, "discovery"), nil)
	}
	if oneShot {
		opts.Reconnect.MaxAttempts = -1
	}
	for _, c := range configure {
		c(&opts)
	}
	applyEnvOptions(&opts, os.Getenv)
	sup, err := mcpvisor.Start(ctx, opts)
	if err != nil {
		a.log.Error().Err(err).Msg("starting the supervisor")
		return nil, err
	}
	return sup, nil
}

// noClientToAnswer answers a server's request (sampling, elicitation,
// roots) in a command that has no client to put it to.
func noClientToAnswer(_ context.Context, server, method string, _ json.RawMessage) (any, error) {
	return nil, protocol.NewError(protocol.CodeMethodNotFound, "mcpvisor: no client is connected to answer %s", method)
}

// logWhere says where OAuth tokens are kept. The file store chosen
// because no OS secret store works (usual on a server or in a container)
// is an expected condition: one plain line, with why at debug level.
func (t *tokenStore) logWhere() {
	in := t.info
	if in.Fallback == "" {
		t.out.log.Info().Str("token_store", in.String()).Msg("OAuth token store")
		return
	}
	t.out.log.Info().Msgf("OAuth tokens are kept in %s: no OS secret store works here", in.Where)
	t.out.log.Debug().Str("reason", in.Fallback).Msg("no OS secret store")
}

// closeSupervisor closes sup within closeTimeout and logs a failure.
func (a *app) closeSupervisor(sup *mcpvisor.Supervisor) error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := sup.Close(ctx); err != nil {
		a.log.Error().Err(err).Msg("closing the supervisor")
		return err
	}
	return nil
}

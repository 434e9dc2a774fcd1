// Command bench is the benchmark runner behind `mcpvisor bench`: it runs
// mcpvisor, the official Go SDK's client and mcp-go's client against
// fleets of mcpvisor's mock server (and a bare echo as the floor), and
// writes results.json, summary.md and PNG plots. See -h, and
// bench/peers/README.md.
//
// It lives in the nested module bench/peers so that the peers never
// become dependencies of mcpvisor; `mcpvisor bench` runs it with
// `go run` from the source tree.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/bench/peers/harness"
)

// EnvWorkDir is set by `mcpvisor bench` to the directory it was run in:
// a relative -out is taken from there (go run runs this in the module's
// directory).
const EnvWorkDir = "MCPVISOR_BENCH_WD"

const usage = `Usage: mcpvisor bench [flags]

Runs load and supervision benchmarks against mcpvisor's mock server and
writes results.json, summary.md and PNG plots to --out.

Scenarios (--scenarios, comma-separated; default all):
  call     round trip of tools/call per client (mcpvisor, gosdk, mcpgo),
           transport (stdio, http = Streamable HTTP, ws = WebSocket, mcpvisor
           only) and era, sequentially and with calls in flight, for each
           payload: p50/p90/p99 latency, calls/s, the client's CPU per call
           (getrusage; servers are other processes), allocations per call
  limit    the same round trip over a bare newline-JSON echo child (pipe)
           and a plain net/http echo server (loopback): the floor
  servers  the stdio round trip per client against servers no one here
           wrote, beside the mock: testdata/gosdkserver (built with the
           official Go SDK) and server-everything (npm, from make deps;
           --everything overrides), sequential and 32 in flight, pinned to
           2025-11-25: calls/s, client and server CPU per call
  connect  N stdio servers and N HTTP sessions to all-ready per client, and
           a bare spawn of N processes: time, peak RSS, goroutines, heap and
           descriptors per connection
  storm    mcpvisor: N ready stdio servers SIGKILLed at once, each with a
           call in flight: time until all are ready again, how the calls
           failed, how calls sent meanwhile fared
  fanout   mcpvisor: one list_changed to N subscribers: delivery latency, drops
  sandbox  mcpvisor: N stdio servers to all-ready confined (Landlock, bwrap:
           each that works here) against unconfined, in alternating rounds;
           sequential calls to one confined server against one unconfined

Profiles: the default (full) runs every size but 1,000 stdio servers
(--large adds them: a thousand live processes, several GiB); --quick is
make bench's, about three minutes on 2 vCPUs. The flags below override
the profile's sizes.

Flags (a single dash, -quick, works too):
`

func main() {
	mcpvisor.HelperMain() // the process helper of mcpvisor's stdio servers
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// printFlags lays out fs's flags as mcpvisor's other commands do (cobra's
// layout): "--name TYPE" in one column, the usage aligned beside it.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	type row struct{ left, usage string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		typ, use := flag.UnquoteUsage(f)
		left := "      --" + f.Name
		if typ != "" {
			left += " " + typ
		}
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "false" {
			use += fmt.Sprintf(" (default %q)", f.DefValue)
		}
		rows = append(rows, row{left, use})
		width = max(width, len(left))
	})
	for _, r := range rows {
		fmt.Fprintf(w, "%-*s   %s\n", width, r.left, r.usage)
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // printed for -h only, below
	var (
		quick       = fs.Bool("quick", false, "the short profile (make bench)")
		large       = fs.Bool("large", false, "add N=1000 stdio servers to connect and storm")
		out         = fs.String("out", "", "results `directory` (default <repo>/bench/results/<date>, or <date>-quick)")
		scenarios   = fs.String("scenarios", "", "comma-separated `list` of call, limit, servers, connect, storm, fanout, sandbox (default all)")
		clients     = fs.String("clients", "", "comma-separated `list` of mcpvisor, gosdk, mcpgo (default all)")
		transports  = fs.String("transports", "", "call: comma-separated `list` of stdio, http, ws (default all)")
		payloads    = fs.String("payloads", "", "call: comma-separated `sizes` of the echo's answer (16, 4k, 1m; default the profile's)")
		inflight    = fs.String("inflight", "", "call: comma-separated `levels` of calls in flight, 1 = sequential (default the profile's)")
		eras        = fs.String("eras", "", "call: comma-separated `list` of modern, 2025-11-25 (default the profile's)")
		calls       = fs.Int("calls", 0, "call: at most `N` calls per client and level (default the profile's)")
		duration    = fs.Duration("duration", 0, "call: at most this `long` per client and level (default the profile's)")
		warmup      = fs.String("warmup", "", "call: `N` unmeasured calls before each level (default the profile's)")
		rounds      = fs.Int("rounds", 0, "call: the clients of a level take `N` turns each, in rotation (default the profile's)")
		connectN    = fs.String("connect", "", "connect: comma-separated `numbers` of stdio servers (default the profile's)")
		connectHTTP = fs.String("connect-http", "", "connect: comma-separated `numbers` of HTTP sessions (default the profile's)")
		pool        = fs.Int("pool", 0, "stdio connects at once: mcpvisor's LocalConnectLimit, the peers' and the spawn's semaphore (default 3, mcpvisor's default)")
		httpPool    = fs.Int("http-pool", 0, "HTTP connects at once: mcpvisor's RemoteConnectLimit, the peers' semaphore (default 20, mcpvisor's default)")
		storm       = fs.String("storm", "", "storm: comma-separated `numbers` of stdio servers (default the profile's)")
		fanout      = fs.String("fanout", "", "fanout: comma-separated `numbers` of subscribers (default 1,100,1000)")
		fanoutOps   = fs.Int("fanout-ops", 0, "fanout: list_changed sent per size (default the profile's)")
		sandboxN    = fs.Int("sandbox-n", 0, "sandbox: number of servers (default 50)")
		sandboxSrv  = fs.String("sandbox-server", "", "sandbox: a server `command` line (space-separated) instead of the mock server, with an echo tool (e.g. server-everything)")
		everything  = fs.String("everything", "", "servers: server-everything's `command` line (space-separated; default node and .deps/npm's install, stdio)")
		noPlots     = fs.Bool("no-plots", false, "do not draw the PNG plots")
		profiles    = fs.String("connect-profiles", "", "connect, storm: write a CPU profile of each of mcpvisor's connect and close runs, and of a storm's recovery, into this `directory`")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, usage)
			printFlags(stderr, fs)
			return 0
		}
		fmt.Fprintln(stderr, "Run 'mcpvisor bench --help' for usage.")
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfg := harness.FullProfile()
	if *quick {
		cfg = harness.QuickProfile()
	}
	if *large {
		cfg.Large()
	}
	usageErr := func(err error) int {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	list := func(s string) []string {
		var out []string
		for _, f := range strings.Split(s, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, f)
			}
		}
		return out
	}
	if *scenarios != "" {
		cfg.Scenarios = list(*scenarios)
	}
	if *clients != "" {
		cfg.Clients = list(*clients)
	}
	if *transports != "" {
		cfg.Transports = list(*transports)
	}
	if *payloads != "" {
		var sets []harness.CallSet
		for _, f := range list(*payloads) {
			n, err := harness.ParseSize(f)
			if err != nil {
				return usageErr(err)
			}
			set := cfg.CallSets[0] // the profile's set of this size, else its first
			for _, s := range cfg.CallSets {
				if s.Payload == n {
					set = s
				}
			}
			set.Payload = n
			sets = append(sets, set)
		}
		cfg.CallSets = sets
	}
	sets := []*harness.CallSet{&cfg.ServerCalls}
	for i := range cfg.CallSets {
		sets = append(sets, &cfg.CallSets[i])
	}
	for _, s := range sets {
		if *inflight != "" {
			levels, err := harness.ParseInts(*inflight)
			if err != nil {
				return usageErr(err)
			}
			s.InFlight = levels
		}
		if *eras != "" {
			s.Eras = list(*eras)
		}
		if *calls > 0 {
			s.Calls = *calls
		}
		if *rounds > 0 {
			s.Rounds = *rounds
		}
		if *duration > 0 {
			s.Duration = harness.Duration(*duration)
		}
		if *warmup != "" {
			n, err := strconv.Atoi(*warmup)
			if err != nil || n < 0 {
				return usageErr(fmt.Errorf("bad -warmup %q", *warmup))
			}
			s.Warmup = n
		}
	}
	for _, f := range []struct {
		s   string
		dst *[]int
	}{{*connectN, &cfg.ConnectStdio}, {*connectHTTP, &cfg.ConnectHTTP}, {*storm, &cfg.StormN}, {*fanout, &cfg.FanOut}} {
		if f.s != "" {
			ns, err := harness.ParseInts(f.s)
			if err != nil {
				return usageErr(err)
			}
			*f.dst = ns
		}
	}
	if *pool > 0 {
		cfg.Pool = *pool
	}
	if *httpPool > 0 {
		cfg.HTTPPool = *httpPool
	}
	cfg.ConnectProfiles = *profiles
	if *sandboxN > 0 {
		cfg.SandboxN = *sandboxN
	}
	if *everything != "" {
		cfg.EverythingServer = strings.Fields(*everything)
	}
	if *sandboxSrv != "" {
		cfg.SandboxServer = strings.Fields(*sandboxSrv)
	}
	if *fanoutOps > 0 {
		cfg.FanOutOps = *fanoutOps
	}
	cfg.Plots = !*noPlots
	if err := cfg.Validate(); err != nil {
		return usageErr(err)
	}

	dir, err := outDir(*out, cfg.Profile)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "mcpvisor-bench-")
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	bins, err := harness.Build(tmp)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tty := false
	if f, ok := stderr.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	fmt.Fprintf(stderr, "mcpvisor bench: %s profile, scenarios %s, results to %s\n", cfg.Profile, strings.Join(cfg.Scenarios, ","), dir)
	res := harness.Run(ctx, cfg, bins, harness.NewProgress(stderr, tty))
	res.Command = strings.TrimSpace("mcpvisor bench " + strings.Join(args, " "))
	if err := harness.WriteReport(dir, res); err != nil {
		fmt.Fprintln(stderr, "bench: writing the report:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", filepath.Join(dir, "summary.md"))
	for _, t := range res.Targets {
		verdict := "not measured"
		if t.Met != nil {
			verdict = "MISSED"
			if *t.Met {
				verdict = "met"
			}
		}
		fmt.Fprintf(stdout, "  %-12s %s [%s]: %s\n", verdict, t.Name, t.Cell, t.Got)
	}
	if len(res.Errors) > 0 {
		fmt.Fprintf(stderr, "bench: %d errors (see summary.md)\n", len(res.Errors))
		return 1
	}
	return 0
}

// outDir is the results directory: out (relative to $MCPVISOR_BENCH_WD
// when set), or <repo>/bench/results/<date> (with -quick for the quick
// profile).
func outDir(out, profile string) (string, error) {
	if out != "" {
		if !filepath.IsAbs(out) {
			if wd := os.Getenv(EnvWorkDir); wd != "" {
				out = filepath.Join(wd, out)
			}
		}
		return filepath.Abs(out)
	}
	repo, err := harness.RepoRoot()
	if err != nil {
		return "", err
	}
	name := time.Now().Format("2006-01-02")
	if profile != "full" {
		name += "-" + profile
	}
	return filepath.Join(repo, "bench", "results", name), nil
}

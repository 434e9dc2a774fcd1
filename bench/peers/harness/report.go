package harness

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// WriteReport writes results.json, summary.md and (with cfg.Plots) the
// PNG plots of res into dir, which it creates.
func WriteReport(dir string, res *Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	var plots []string
	if res.Config.Plots {
		if plots, err = WritePlots(dir, res); err != nil {
			return fmt.Errorf("plots: %w", err)
		}
	}
	return os.WriteFile(filepath.Join(dir, "summary.md"), []byte(Summary(res, plots)), 0o644)
}

// thousands writes x rounded, with thousands separators.
func thousands(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	s := strconv.FormatInt(int64(math.Round(x)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// bytesName writes a byte count as B, KiB or MiB.
func bytesName(b float64) string {
	switch a := math.Abs(b); {
	case a >= 10<<20:
		return fmt.Sprintf("%.0f MiB", b/(1<<20))
	case a >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case a >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

func f1(x float64) string {
	if x >= 100 {
		return thousands(x)
	}
	return strconv.FormatFloat(x, 'f', 1, 64)
}

func ratio(a, b float64) string {
	if b == 0 || a == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func eraName(era string) string {
	if era == "" {
		return "–"
	}
	if v := WantVersion[era]; v != "" && v != era {
		return era + " (" + v + ")"
	}
	return era
}

// clientOrder sorts the clients of a table: mcpvisor, the peers, the
// floor and the bare spawn.
func clientOrder(name string) int {
	switch name {
	case Mcpvisor:
		return 0
	case GoSDK:
		return 1
	case McpGo:
		return 2
	case Floor:
		return 3
	case Spawn:
		return 4
	}
	return 5
}

// Summary is the Markdown report of res; plots are the PNG files written
// beside it.
func Summary(res *Results, plots []string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := res.Machine
	w("# mcpvisor bench: %s profile, %s\n\n", res.Config.Profile, res.Started.Format("2006-01-02 15:04 MST"))
	if res.Command != "" {
		w("`%s`, %.0f s", res.Command, res.DurationSec)
	} else {
		w("%.0f s", res.DurationSec)
	}
	if m.Commit != "" {
		w(", mcpvisor at %s", m.Commit)
	}
	w(". Every figure is in [results.json](results.json); how each is measured: `mcpvisor bench -h` and\n")
	w("[bench/peers/README.md](../../peers/README.md#the-runner-mcpvisor-bench).\n\n")
	w("**Machine**: %s, %d cores (GOMAXPROCS %d), %.0f GiB, %s/%s, kernel %s, %s. Load average %s at the start, %s at the end. ",
		m.CPUModel, m.Cores, m.GOMAXPROCS, float64(m.MemTotal)/(1<<30), m.OS, m.Arch, m.Kernel, m.GoVersion, m.LoadAvgStart, m.LoadAvgEnd)
	w("Clients and servers share the CPUs: with calls in flight, calls/s is bounded by both processes' CPU together. ")
	w("Each batch runs once: on a shared VM expect ±20 %% or more between runs; CPU per call and allocations are steadier than calls/s.\n\n")

	// Targets.
	w("## Targets (issues 6, 21 and 26)\n\n")
	metN, missedN, notN := 0, 0, 0
	for _, t := range res.Targets {
		switch {
		case t.Met == nil:
			notN++
		case *t.Met:
			metN++
		default:
			missedN++
		}
	}
	w("%d met, %d missed, %d not measured by this run.\n\n", metN, missedN, notN)
	w("| target | where | want | got | |\n|---|---|---|---|---|\n")
	for _, t := range res.Targets {
		verdict := "not measured"
		if t.Met != nil {
			verdict = "**missed**"
			if *t.Met {
				verdict = "met"
			}
		}
		got := t.Got
		if t.Note != "" {
			got += " — " + t.Note
		}
		w("| %s | %s | %s | %s | %s |\n", t.Name, t.Cell, t.Want, got, verdict)
	}
	w("\n")

	if len(res.Call) > 0 {
		writeCallSummary(&b, res, plots)
	}
	if len(res.Servers) > 0 {
		writeServers(&b, res)
	}
	if len(res.Connect) > 0 {
		writeConnect(&b, res, plots)
	}
	if len(res.Storm) > 0 {
		w("## Reconnect storm (mcpvisor, stdio)\n\n")
		w("N ready servers of one Supervisor (default reconnect policy), each with a `sleep` call in flight, SIGKILLed at once; ")
		w("%d goroutines meanwhile call `echo` on the servers in turn until all are ready again.\n\n", res.Config.StormProbes)
		w("CPU: the client's and its process helper's (the reaper that forks the servers), for the first connect, and from the kill until all were seen ready again (with the probes' calls).\n\n")
		w("| N | pool | first connect ms | its CPU ms | all ready again ms | recovery CPU ms | in-flight calls failed | failed after p50 / p99 / max ms | how they failed | calls sent while recovering | of which failed | their latency p50 / p99 / max ms |\n")
		w("|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---|\n")
		for _, s := range res.Storm {
			if s.Error != "" {
				w("| %d | %d | error: %s | | | | | | | | | |\n", s.N, s.Pool, s.Error)
				continue
			}
			w("| %d | %d | %s | %s | %s | %s | %d of %d | %s / %s / %s | %s | %d | %d %s | %s / %s / %s |\n", s.N, s.Pool, f1(s.InitialReadyMs), f1(s.InitialCPUMs), f1(s.AllReadyAgainMs), f1(s.RecoveryCPUMs),
				s.Failed, s.InFlight, f1(s.FailP50Ms), f1(s.FailP99Ms), f1(s.FailMaxMs), kinds(s.FailKinds),
				s.ProbeSent, s.ProbeFailed, kindsParen(s.ProbeKinds), f1(s.ProbeP50Ms), f1(s.ProbeP99Ms), f1(s.ProbeMaxMs))
		}
		w("\n")
	}
	if len(res.FanOut) > 0 {
		w("## Fan-out (mcpvisor)\n\n")
		w("One server's `announce` tool adds a tool and sends `notifications/tools/list_changed`; the Supervisor re-lists and publishes one `tools_changed` to every subscriber (`Subscribe`, default buffer), each draining its channel in a goroutine. ")
		w("Delivery: from the event's `Time` to its receipt, over every subscriber and op. Op: from the call until every subscriber has the event.\n\n")
		w("| subscribers | ops | delivery p50 µs | p99 µs | max µs | op p50 ms | op p99 ms | drops |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, f := range res.FanOut {
			if f.Error != "" {
				w("| %d | %d | error: %s | | | | | |\n", f.Subscribers, f.Ops, f.Error)
				continue
			}
			w("| %d | %d | %s | %s | %s | %.2f | %.2f | %d |\n", f.Subscribers, f.Ops, f1(f.DeliveryP50Us), f1(f.DeliveryP99Us), f1(f.DeliveryMaxUs), f.OpP50Ms, f.OpP99Ms, f.Drops)
		}
		w("\n")
	}
	if len(res.Sandbox) > 0 {
		writeSandbox(&b, res)
	}
	if len(res.Notes) > 0 {
		w("## Notes\n\n")
		for _, n := range res.Notes {
			w("- %s\n", n)
		}
		w("\n")
	}
	if len(res.Errors) > 0 {
		w("## Errors\n\n")
		for _, e := range res.Errors {
			w("- %s\n", e)
		}
		w("\n")
	}
	return b.String()
}

func kinds(m map[string]int) string {
	if len(m) == 0 {
		return "–"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func kindsParen(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	return "(" + kinds(m) + ")"
}

// callGroups are the (transport, payload, era) of the mcpvisor batches, in
// run order.
type callGroup struct {
	transport string
	payload   int
	era       string
}

func writeCallSummary(b *strings.Builder, res *Results, plots []string) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## Calls: mcpvisor vs go-sdk vs mcp-go vs the floor\n\n")
	w("One session per client (a Supervisor with one server, for mcpvisor), `tools/call` of the mock's `echo`; ")
	w("the clients of a row (and the floor) are connected at once and take turns in rounds, so that the machine's load over time falls on them alike; ")
	w("the floor is the same request over a bare newline-JSON echo child (pipe) or a plain net/http echo server (loopback HTTP) with no MCP layer. ")
	w("calls/s over the batch; CPU: the client process's user+system time (getrusage) per call — every server is another process; ")
	w("allocs: runtime Mallocs per call. \"÷ best peer\" is mcpvisor's calls/s over the faster peer's; \"floor ÷\" the floor's calls/s over mcpvisor's; ")
	w("\"CPU ÷ faster peer\" mcpvisor's CPU per call over the faster peer's.\n\n")
	var groups []callGroup
	for _, c := range res.Call {
		if c.Client == Floor {
			continue
		}
		g := callGroup{c.Transport, c.PayloadBytes, c.Era}
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	w("| transport | era | payload | in flight | mcpvisor calls/s | go-sdk | mcp-go | floor | ÷ best peer | floor ÷ | CPU µs/call mcpvisor | go-sdk | mcp-go | floor | CPU ÷ faster peer |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, g := range groups {
		var levels []int
		for _, c := range res.Call {
			if c.Transport == g.transport && c.PayloadBytes == g.payload && c.Era == g.era && !slices.Contains(levels, c.InFlight) {
				levels = append(levels, c.InFlight)
			}
		}
		slices.Sort(levels)
		for _, n := range levels {
			cs := map[string]*CallResult{}
			for _, name := range []string{Mcpvisor, GoSDK, McpGo} {
				cs[name] = findCall(res, name, g.transport, g.era, g.payload, n)
			}
			cs[Floor] = findCall(res, Floor, g.transport, "", g.payload, n)
			rate := func(c *CallResult) string {
				if c == nil {
					return "–"
				}
				return thousands(c.CallsPerSec)
			}
			cpu := func(c *CallResult) string {
				if c == nil {
					return "–"
				}
				return f1(c.CPUPerCallUs)
			}
			best, vsFloor, cpuRatio := "–", "–", "–"
			if m := cs[Mcpvisor]; m != nil {
				if p := fasterPeer(res, m); p != nil {
					best = ratio(m.CallsPerSec, p.CallsPerSec)
					cpuRatio = ratio(m.CPUPerCallUs, p.CPUPerCallUs)
				}
				if f := cs[Floor]; f != nil {
					vsFloor = ratio(f.CallsPerSec, m.CallsPerSec)
				}
			}
			w("| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", g.transport, eraName(g.era), SizeName(g.payload), n,
				rate(cs[Mcpvisor]), rate(cs[GoSDK]), rate(cs[McpGo]), rate(cs[Floor]), best, vsFloor,
				cpu(cs[Mcpvisor]), cpu(cs[GoSDK]), cpu(cs[McpGo]), cpu(cs[Floor]), cpuRatio)
		}
	}
	w("\n")

	w("### Every batch\n\n")
	w("| transport | payload | era | in flight | client | calls | calls/s | p50 µs | p90 µs | p99 µs | CPU µs/call | allocs/call | bytes/call | server CPU µs/call |\n")
	w("|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	rows := slices.Clone(res.Call)
	slices.SortStableFunc(rows, func(a, b CallResult) int {
		if a.Transport != b.Transport {
			return strings.Compare(transportOrder(a.Transport), transportOrder(b.Transport))
		}
		if a.PayloadBytes != b.PayloadBytes {
			return a.PayloadBytes - b.PayloadBytes
		}
		if a.InFlight != b.InFlight {
			return a.InFlight - b.InFlight
		}
		if a.Era != b.Era {
			return strings.Compare(a.Era, b.Era)
		}
		return clientOrder(a.Client) - clientOrder(b.Client)
	})
	for _, c := range rows {
		if c.Error != "" {
			w("| %s | %s | %s | %d | %s | error: %s | | | | | | | | |\n", c.Transport, SizeName(c.PayloadBytes), eraName(c.Era), c.InFlight, c.Client, oneLine(c.Error))
			continue
		}
		srv := "–"
		if c.ServerCPUPerCallUs > 0 {
			srv = f1(c.ServerCPUPerCallUs)
		}
		w("| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Transport, SizeName(c.PayloadBytes), eraName(c.Era), c.InFlight, c.Client,
			thousands(float64(c.Calls)), thousands(c.CallsPerSec), f1(c.P50Us), f1(c.P90Us), f1(c.P99Us), f1(c.CPUPerCallUs), f1(c.AllocsPerCall), bytesName(c.BytesPerCall), srv)
	}
	w("\n")
	for _, p := range plots {
		if strings.HasPrefix(p, "latency-") || strings.HasPrefix(p, "throughput-") {
			w("![%s](%s)\n", strings.TrimSuffix(p, ".png"), p)
		}
	}
	w("\n")
}

func transportOrder(t string) string {
	switch t {
	case TransportStdio:
		return "0"
	case TransportHTTP:
		return "1"
	}
	return "2" + t
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func writeConnect(b *strings.Builder, res *Results, plots []string) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## Connect: N servers to all-ready\n\n")
	w("stdio: N mock server processes (era %s); HTTP: N sessions to one mock server process, each on its own path (/mcp/s0042: N virtual remote servers; era %s, sessions with a standalone GET stream where the client opens one). ", ConnectEraStdio, ConnectEraHTTP)
	w("mcpvisor: one Supervisor (started before the baseline) with N servers, `LocalConnectLimit`/`RemoteConnectLimit` = pool; the peers: N sessions connected pool at a time (a semaphore); ")
	w("spawn: N bare processes of the mock binary exiting at once (`-exit-at-start`), pool at a time. ")
	w("All ready: from the start until every one is connected, negotiated and listed. ")
	w("Per connection, once idle: growth of the heap (HeapAlloc after GC), of goroutine stacks, goroutines and open descriptors over the client's state before, ÷ N. ")
	w("Peak RSS: the client process's VmHWM while connecting (reset before each run), and in parentheses its growth over the RSS before.\n\n")
	w("| transport | N | pool | client | all ready ms | ÷ spawn | close ms | CPU ms | peak RSS | heap/conn | stack/conn | goroutines/conn | peak goroutines | fds/conn |\n")
	w("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	rows := slices.Clone(res.Connect)
	slices.SortStableFunc(rows, func(a, b ConnectResult) int {
		if a.Transport != b.Transport {
			return strings.Compare(transportOrder(a.Transport), transportOrder(b.Transport))
		}
		if a.N != b.N {
			return a.N - b.N
		}
		return clientOrder(a.Client) - clientOrder(b.Client)
	})
	for _, c := range rows {
		if c.Error != "" {
			w("| %s | %d | %d | %s | error: %s | | | | | | | | | |\n", c.Transport, c.N, c.Pool, c.Client, oneLine(c.Error))
			continue
		}
		vsSpawn := "–"
		if s := findConnect(res, Spawn, c.Transport, c.N); s != nil && c.Client != Spawn {
			vsSpawn = ratio(c.AllReadyMs, s.AllReadyMs)
		}
		growth := bytesName(float64(c.PeakRSSGrowthBytes))
		if c.PeakRSSGrowthBytes >= 0 {
			growth = "+" + growth
		}
		peak := fmt.Sprintf("%s (%s)", bytesName(float64(c.PeakRSSBytes)), growth)
		if c.PeakRSSSinceStart {
			peak = bytesName(float64(c.PeakRSSBytes)) + " (since start)"
		}
		if c.Client == Spawn {
			w("| %s | %d | %d | %s | %s | | | %s | %s | | | | %d | |\n", c.Transport, c.N, c.Pool, c.Client, f1(c.AllReadyMs), f1(c.CPUMs), peak, c.PeakGoroutines)
			continue
		}
		cpu := f1(c.CPUMs)
		if c.HelperCPUMs > 0 {
			cpu += fmt.Sprintf(" (helper %s)", f1(c.HelperCPUMs))
		}
		w("| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %d | %.2f |\n", c.Transport, c.N, c.Pool, c.Client, f1(c.AllReadyMs), vsSpawn, f1(c.CloseMs), cpu,
			peak, bytesName(c.HeapPerConn), bytesName(c.StackPerConn), c.GoroutinesPerConn, c.PeakGoroutines, c.FDsPerConn)
	}
	w("\n")
	for _, p := range plots {
		if strings.HasPrefix(p, "connect-") || strings.HasPrefix(p, "memory-") {
			w("![%s](%s)\n", strings.TrimSuffix(p, ".png"), p)
		}
	}
	w("\n")
}

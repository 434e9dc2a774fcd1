package harness

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
)

// ScenarioSandbox: N stdio servers of one Supervisor to all-ready,
// confined (each Linux mechanism that works here) against unconfined, in
// rounds that alternate them; and sequential calls to one confined
// server against one unconfined.
const ScenarioSandbox = "sandbox"

// The sandbox scenario's target: confined servers all ready within 1.3×
// the unconfined time.
const targetSandboxReady = 1.3

// Unconfined names the sandbox scenario's baseline variant.
const Unconfined = "unconfined"

// SandboxResult is one variant of the sandbox scenario.
type SandboxResult struct {
	Variant string `json:"variant"` // unconfined, landlock or bwrap
	N       int    `json:"n"`
	Pool    int    `json:"pool"`
	// AllReadyMs are the rounds' times for N servers to be ready;
	// MedianReadyMs their median.
	AllReadyMs    []float64 `json:"allReadyMs"`
	MedianReadyMs float64   `json:"medianReadyMs"`
	// CPUPerServerMs are the rounds' CPU per server, from the
	// Supervisor's start to its close: this process's and the process
	// helper's with everything below it (counted when the helper ends
	// with the Supervisor). Steadier than the wall time on a busy
	// machine. MedianCPUPerServerMs is their median.
	CPUPerServerMs       []float64 `json:"cpuPerServerMs,omitempty"`
	MedianCPUPerServerMs float64   `json:"medianCpuPerServerMs,omitempty"`
	// Calls: sequential echo calls to one server of the variant, in
	// rounds interleaved with the other variants'.
	Calls CallStats `json:"calls"`
	Error string    `json:"error,omitempty"`
}

// execStageSuffix marks a variant whose servers are started through the
// exec stage (sandbox.Options.ExecStage: a start of the host
// binary) rather than util-linux's prlimit, the default where installed.
const execStageSuffix = "-exec-stage"

// sandboxVariants are the variants this machine can run: unconfined, and
// each mechanism that works here, by default and through the exec stage.
func (r *runner) sandboxVariants() []string {
	vs := []string{Unconfined}
	if runtime.GOOS != "linux" {
		r.note("sandbox: the mechanisms measured are Linux's; only the unconfined baseline ran")
		return vs
	}
	vs = append(vs, string(transports.SandboxLandlock))
	if _, err := exec.LookPath("bwrap"); err == nil {
		vs = append(vs, string(transports.SandboxBwrap))
	} else {
		r.note("sandbox: bwrap is not installed: bubblewrap was not measured")
	}
	for _, v := range vs[1:] {
		vs = append(vs, v+execStageSuffix)
	}
	return vs
}

// sandboxConfig is the config of a mock server of the variant.
func (r *runner) sandboxConfig(variant string) transports.Config {
	tc := transports.Config{Command: r.bins.Mock}
	if len(r.cfg.SandboxServer) > 0 {
		tc = transports.Config{Command: r.cfg.SandboxServer[0], Args: r.cfg.SandboxServer[1:]}
	}
	if variant != Unconfined {
		m := strings.TrimSuffix(variant, execStageSuffix)
		tc.Sandbox = &transports.Sandbox{Enabled: true, Mechanism: transports.SandboxMechanism(m)}
	}
	return tc
}

// sandboxOptions sets the supervisor options of the variant.
func sandboxOptions(variant string) func(*mcpvisor.Options) {
	return func(o *mcpvisor.Options) {
		o.Sandbox.ExecStage = strings.HasSuffix(variant, execStageSuffix)
	}
}

func (r *runner) sandboxScenario(ctx context.Context) {
	variants := r.sandboxVariants()
	n, rounds := r.cfg.SandboxN, max(r.cfg.SandboxRounds, 1)
	r.prog.Begin(ScenarioSandbox, rounds*len(variants)+len(variants))
	results := make([]SandboxResult, len(variants))
	for i, v := range variants {
		results[i] = SandboxResult{Variant: v, N: n, Pool: r.cfg.Pool}
	}
	// Connect: rounds, each running the variants in a rotated order.
	for round := range rounds {
		for k := range variants {
			i := (k + round) % len(variants)
			res := &results[i]
			if ctx.Err() != nil || res.Error != "" {
				continue
			}
			r.prog.Step("%s N=%d round %d", res.Variant, n, round+1)
			cpu0 := CPUTime() + ChildrenCPUTime()
			f, err := startSupervisorFleet(ctx, r.sandboxConfig(res.Variant), r.sandboxEra(), r.cfg.Pool, 0, sandboxOptions(res.Variant))
			if err != nil {
				res.Error = r.fail("sandbox %s: %v", res.Variant, err)
				continue
			}
			octx, cancel := context.WithTimeout(ctx, connectTimeout+time.Duration(n)*50*time.Millisecond)
			t0 := time.Now()
			err = f.open(octx, n)
			ready := time.Since(t0)
			cancel()
			if cerr := f.close(); err == nil && cerr != nil {
				err = fmt.Errorf("close: %w", cerr)
			}
			if err != nil {
				res.Error = r.fail("sandbox %s N=%d: %v", res.Variant, n, err)
				continue
			}
			res.AllReadyMs = append(res.AllReadyMs, ms(ready))
			res.CPUPerServerMs = append(res.CPUPerServerMs, ms(CPUTime()+ChildrenCPUTime()-cpu0)/float64(n))
		}
	}
	for i := range results {
		results[i].MedianReadyMs = median(results[i].AllReadyMs)
		results[i].MedianCPUPerServerMs = median(results[i].CPUPerServerMs)
	}

	// Calls: one server per variant, interleaved rounds.
	type conn struct {
		s       Session
		samples []Sample
	}
	conns := make([]*conn, len(variants))
	if len(r.cfg.SandboxServer) > 0 {
		r.note("sandbox: calls are measured with the mock server only (its echo tool); -sandbox-server measured the connects")
		variants = nil // no calls
	}
	for i := range variants {
		res := &results[i]
		if res.Error != "" || ctx.Err() != nil {
			continue
		}
		r.prog.Step("%s: sequential calls", res.Variant)
		var opts mcpvisor.Options
		sandboxOptions(res.Variant)(&opts)
		s, err := startMcpvisorWith(ctx, r.sandboxConfig(res.Variant), r.sandboxEra(), opts)
		if err != nil {
			res.Error = r.fail("sandbox %s: calls: %v", res.Variant, err)
			continue
		}
		if err := Warm(ctx, 200, 1, EchoCall(s, EchoText)); err != nil {
			res.Error = r.fail("sandbox %s: warm-up: %v", res.Variant, err)
			s.Close()
			continue
		}
		conns[i] = &conn{s: s}
	}
	batch := Batch{InFlight: 1, Calls: 20000, Duration: r.cfg.SandboxCallDuration.d() / time.Duration(rounds)}
	for round := range rounds {
		for k := range variants {
			i := (k + round) % len(variants)
			c := conns[i]
			if c == nil || ctx.Err() != nil {
				continue
			}
			smp, err := MeasureSample(ctx, batch, EchoCall(c.s, EchoText))
			if err != nil {
				results[i].Error = r.fail("sandbox %s: calls: %v", results[i].Variant, err)
				c.s.Close()
				conns[i] = nil
				continue
			}
			c.samples = append(c.samples, smp)
		}
	}
	for i, c := range conns {
		if c == nil {
			continue
		}
		results[i].Calls = Combine(c.samples...)
		if err := c.s.Close(); err != nil {
			r.fail("sandbox %s: close: %v", results[i].Variant, err)
		}
	}
	r.res.Sandbox = append(r.res.Sandbox, results...)
	r.prog.End("%d variants", len(variants))
}

// sandboxEra is the era of the sandbox scenario's servers: the mock
// server's default, or whatever another server negotiates.
func (r *runner) sandboxEra() string {
	if len(r.cfg.SandboxServer) > 0 {
		return ""
	}
	return ConnectEraStdio
}

// d returns the duration, or one second for none.
func (d Duration) d() time.Duration {
	if d <= 0 {
		return time.Second
	}
	return time.Duration(d)
}

// median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// findSandbox returns the variant's result, or nil.
func findSandbox(res *Results, variant string) *SandboxResult {
	for i := range res.Sandbox {
		if res.Sandbox[i].Variant == variant {
			return &res.Sandbox[i]
		}
	}
	return nil
}

// sandboxTargets: confined servers ready within 1.3× the unconfined time,
// and calls to a confined server costing the client no more CPU (within
// noise: reported, not judged).
func sandboxTargets(res *Results) []Target {
	var ts []Target
	base := findSandbox(res, Unconfined)
	for _, v := range []string{string(transports.SandboxLandlock), string(transports.SandboxBwrap)} {
		t := Target{Name: "N stdio servers all ready, confined ≤ 1.3× unconfined (issue 26)", Cell: v, Want: "≤ 1.30×"}
		s := findSandbox(res, v)
		if base == nil || s == nil || base.Error != "" || s.Error != "" || base.MedianReadyMs == 0 || s.MedianReadyMs == 0 {
			t.Got = "not measured"
		} else {
			r := s.MedianReadyMs / base.MedianReadyMs
			t.Cell = fmt.Sprintf("%s, N=%d, pool %d", v, s.N, s.Pool)
			t.Got = fmt.Sprintf("%.2f× (median of %d rounds: %s %.0f ms, unconfined %.0f ms)", r, len(s.AllReadyMs), v, s.MedianReadyMs, base.MedianReadyMs)
			if base.MedianCPUPerServerMs > 0 && s.MedianCPUPerServerMs > 0 {
				t.Got += fmt.Sprintf("; CPU per server %.2f× (%.2f ms, unconfined %.2f ms)", s.MedianCPUPerServerMs/base.MedianCPUPerServerMs,
					s.MedianCPUPerServerMs, base.MedianCPUPerServerMs)
			}
			ok := r <= targetSandboxReady
			t.Met = &ok
			if base.Calls.Calls > 0 && s.Calls.Calls > 0 {
				t.Note = fmt.Sprintf("sequential calls: %s/s at %.1f µs client CPU per call, unconfined %s/s at %.1f µs",
					thousands(s.Calls.CallsPerSec), s.Calls.CPUPerCallUs, thousands(base.Calls.CallsPerSec), base.Calls.CPUPerCallUs)
			}
		}
		ts = append(ts, t)
	}
	return ts
}

// writeSandbox writes the sandbox scenario's table.
func writeSandbox(b *strings.Builder, res *Results) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## Sandbox: confined against unconfined stdio servers (mcpvisor)\n\n")
	server := "mock"
	if len(res.Config.SandboxServer) > 0 {
		server = "`" + strings.Join(res.Config.SandboxServer, " ") + "`"
	}
	w("Server: %s. ", server)
	w("N servers of one Supervisor to all-ready, `\"sandbox\": {\"mechanism\": …}` (every default: no network, 2 GiB data limit) against none, ")
	w("in rounds that alternate the variants; then sequential `echo` calls to one server of each variant, in interleaved rounds. ")
	w("A variant ending in `%s` starts its servers through the exec stage (a start of the host binary; `Options.Sandbox.ExecStage`), ", execStageSuffix)
	w("the others through util-linux's prlimit where it is installed.\n\n")
	w("CPU/server is the CPU of this process and of the process helper with everything below it (servers, exec stages, prlimit, bubblewrap), ")
	w("from the Supervisor's start to its close, per server (median of the rounds): steadier than the wall time on a busy machine.\n\n")
	w("| variant | N | pool | all ready ms (rounds) | median ms | ÷ unconfined | CPU/server ms | ÷ unconfined | calls/s | p50 µs | client CPU/call µs | server CPU/call µs |\n")
	w("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	base := findSandbox(res, Unconfined)
	for _, s := range res.Sandbox {
		if s.Error != "" {
			w("| %s | %d | %d | error: %s | | | | | | | | |\n", s.Variant, s.N, s.Pool, oneLine(s.Error))
			continue
		}
		rounds := make([]string, len(s.AllReadyMs))
		for i, x := range s.AllReadyMs {
			rounds[i] = fmt.Sprintf("%.0f", x)
		}
		vs, cpuVs := "–", "–"
		if base != nil && s.Variant != Unconfined && base.MedianReadyMs > 0 {
			vs = ratio(s.MedianReadyMs, base.MedianReadyMs)
		}
		if base != nil && s.Variant != Unconfined && base.MedianCPUPerServerMs > 0 {
			cpuVs = ratio(s.MedianCPUPerServerMs, base.MedianCPUPerServerMs)
		}
		w("| %s | %d | %d | %s | %.0f | %s | %.2f | %s | %s | %s | %s | %s |\n", s.Variant, s.N, s.Pool, strings.Join(rounds, ", "), s.MedianReadyMs, vs,
			s.MedianCPUPerServerMs, cpuVs, thousands(s.Calls.CallsPerSec), f1(s.Calls.P50Us), f1(s.Calls.CPUPerCallUs), f1(s.Calls.ServerCPUPerCallUs))
	}
	w("\n")
}

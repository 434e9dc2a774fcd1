package harness

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Progress shows how a run is going on a writer (stderr): on a terminal,
// one line redrawn at every step; otherwise one line per scenario when it
// ends, and a line per error. Safe for concurrent use.
type Progress struct {
	w   io.Writer
	tty bool

	mu       sync.Mutex
	scenario string
	total    int
	done     int
	start    time.Time
}

// NewProgress writes to w; tty says whether w is a terminal.
func NewProgress(w io.Writer, tty bool) *Progress {
	if w == nil {
		w = io.Discard
	}
	return &Progress{w: w, tty: tty}
}

// Begin starts a scenario of about total steps.
func (p *Progress) Begin(scenario string, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scenario, p.total, p.done, p.start = scenario, total, 0, time.Now()
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s: starting…", scenario)
	}
}

// Step says what the scenario does now.
func (p *Progress) Step(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K[%s %d/%d %s] %s", p.scenario, p.done, max(p.total, p.done),
			time.Since(p.start).Round(time.Second), fmt.Sprintf(format, args...))
	}
}

// Status redraws the terminal line without counting a step.
func (p *Progress) Status(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K[%s %d/%d %s] %s", p.scenario, p.done, max(p.total, p.done),
			time.Since(p.start).Round(time.Second), fmt.Sprintf(format, args...))
	}
}

// End ends the scenario with a summary line.
func (p *Progress) End(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "%s: %s (%.1f s)\n", p.scenario, fmt.Sprintf(format, args...), time.Since(p.start).Seconds())
}

// Errorf reports an error on a line of its own.
func (p *Progress) Errorf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "%s: error: %s\n", p.scenario, fmt.Sprintf(format, args...))
}

// runner runs the scenarios of one Config and collects the results.
type runner struct {
	cfg  Config
	bins Binaries
	prog *Progress
	res  *Results
}

// Run runs every scenario of cfg with the child programs bins and returns
// the results. It stops between two measurements when ctx ends and
// returns what it has. Failures of a measurement are recorded in it and
// in Results.Errors; the run goes on.
func Run(ctx context.Context, cfg Config, bins Binaries, prog *Progress) *Results {
	if prog == nil {
		prog = NewProgress(nil, false)
	}
	repo, _ := RepoRoot()
	r := &runner{cfg: cfg, bins: bins, prog: prog, res: &Results{Started: time.Now(), Config: cfg, Machine: DescribeMachine(repo)}}
	if cfg.Has(ScenarioCall) || cfg.Has(ScenarioLimit) {
		r.callScenario(ctx)
	}
	if cfg.Has(ScenarioServers) && ctx.Err() == nil {
		r.serversScenario(ctx)
	}
	if cfg.Has(ScenarioConnect) && ctx.Err() == nil {
		r.connectScenario(ctx)
	}
	if cfg.Has(ScenarioStorm) && ctx.Err() == nil {
		r.stormScenario(ctx)
	}
	if cfg.Has(ScenarioFanOut) && ctx.Err() == nil {
		r.fanOutScenario(ctx)
	}
	if cfg.Has(ScenarioSandbox) && ctx.Err() == nil {
		r.sandboxScenario(ctx)
	}
	if ctx.Err() != nil {
		r.res.Errors = append(r.res.Errors, "the run was interrupted: the results are partial")
	}
	if left := Children(bins.Mock); len(left) > 0 {
		r.res.Errors = append(r.res.Errors, fmt.Sprintf("%d mock server processes outlived their clients (killed): %v", len(left), left))
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	r.res.Targets = EvaluateTargets(r.res)
	r.res.Finished = time.Now()
	r.res.DurationSec = r.res.Finished.Sub(r.res.Started).Seconds()
	r.res.Machine.LoadAvgEnd = LoadAvg()
	return r.res
}

// fail records an error of the current scenario.
func (r *runner) fail(format string, args ...any) string {
	msg := fmt.Sprintf(format, args...)
	r.res.Errors = append(r.res.Errors, r.prog.scenarioName()+": "+msg)
	r.prog.Errorf("%s", msg)
	return msg
}

func (r *runner) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for _, n := range r.res.Notes {
		if n == msg {
			return
		}
	}
	r.res.Notes = append(r.res.Notes, msg)
}

func (p *Progress) scenarioName() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.scenario
}

// errString is err's message, or "".
func errString(err error) string {
	if err == nil {
		return ""
	}
	return strings.TrimSpace(err.Error())
}

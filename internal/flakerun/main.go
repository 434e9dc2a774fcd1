// Command flakerun is the instrument of `make flake`: it runs the tests
// of every package many times (go test -count=N) in each of several
// modes, one package and one mode at a time, and prints how many runs
// each made and how many failed, as a table.
//
// Modes: race (-race), cover (-cover) and shuffle (-shuffle=on, a new
// order in every run), and all (the three flags at once: one row for a
// package whose three rows would take too long). A run fails when one of
// its top-level tests fails; a binary that ends early (a -timeout panic
// with its goroutine dump, a crash) fails the run it was in and every run
// it never started.
//
//	go run ./internal/flakerun [flags] [module dir ...]
//
// The module directories default to the main module and the nested
// modules with tests (bench/peers, testdata/gosdkclient). The go test
// output of every package and mode that failed is kept under -logs.
// Progress goes to stderr, the table to stdout; the exit status is 1 when
// a run failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

func main() {
	count := flag.Int("count", 20, "runs of each package in each mode (go test -count)")
	modes := flag.String("modes", "race,cover,shuffle", "modes, comma-separated: race, cover, shuffle, all (the three at once)")
	budget := flag.Duration("budget", 2*time.Minute, "time one run of a package may take; the binary's -timeout is count × budget")
	budgets := flag.String("budgets", "", "per-package budgets, comma-separated pattern=duration (pattern: a regexp on the import path)")
	only := flag.String("pkg", "", "run only the packages whose import path matches this regexp")
	logs := flag.String("logs", ".deps/flake", "directory for the go test -json output of the packages that failed")
	flag.Parse()
	mods := flag.Args()
	if len(mods) == 0 {
		mods = []string{".", "bench/peers", "testdata/gosdkclient"}
	}
	plan, err := newPlan(*modes, *budget, *budgets, *only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flakerun:", err)
		os.Exit(2)
	}
	var pkgs []pkg
	for _, dir := range mods {
		found, err := listPackages(dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "flakerun: listing the packages of %s: %v\n", dir, err)
			os.Exit(2)
		}
		for _, p := range found {
			if plan.only == nil || plan.only.MatchString(p.path) {
				pkgs = append(pkgs, p)
			}
		}
	}
	if err := os.MkdirAll(*logs, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "flakerun:", err)
		os.Exit(2)
	}
	rows := make([]row, len(pkgs))
	began := time.Now()
	step, steps := 0, len(pkgs)*len(plan.modes)
	for i, p := range pkgs {
		rows[i].pkg = p
		for _, m := range plan.modes {
			step++
			fmt.Fprintf(os.Stderr, "[%d/%d] %s %s: %d runs …\n", step, steps, p.path, m, *count)
			res := runPackage(p, m, *count, plan.budgetOf(p.path), *logs)
			rows[i].results = append(rows[i].results, res)
			fmt.Fprintf(os.Stderr, "[%d/%d] %s %s: %s (%v; %v since the start)\n", step, steps, p.path, m,
				res.summary(*count), res.wall.Round(time.Second), time.Since(began).Round(time.Second))
		}
	}
	failed := printTable(os.Stdout, plan.modes, rows, *count)
	fmt.Printf("\n%d packages × %d modes × %d runs in %v\n", len(pkgs), len(plan.modes), *count, time.Since(began).Round(time.Second))
	if failed {
		os.Exit(1)
	}
}

// pkg is one package with tests, and the module directory it is run from.
type pkg struct {
	dir, path string
}

// listPackages lists the packages of the module in dir that have tests.
func listPackages(dir string) ([]pkg, error) {
	cmd := exec.Command("go", "list", "-f", "{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}", "./...")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var pkgs []pkg
	for _, line := range strings.Fields(string(out)) {
		pkgs = append(pkgs, pkg{dir: dir, path: line})
	}
	return pkgs, nil
}

// plan is what to run: the modes, and each package's time budget.
type plan struct {
	modes   []string
	budget  time.Duration
	budgets []budgetRule
	only    *regexp.Regexp
}

type budgetRule struct {
	pattern *regexp.Regexp
	budget  time.Duration
}

func newPlan(modes string, budget time.Duration, budgets, only string) (plan, error) {
	p := plan{budget: budget}
	for _, m := range strings.Split(modes, ",") {
		if _, ok := modeFlags[m]; !ok {
			return p, fmt.Errorf("unknown mode %q (race, cover, shuffle, all)", m)
		}
		p.modes = append(p.modes, m)
	}
	for _, rule := range strings.Split(budgets, ",") {
		if rule == "" {
			continue
		}
		pattern, d, ok := strings.Cut(rule, "=")
		dur, err := time.ParseDuration(d)
		re, rerr := regexp.Compile(pattern)
		if !ok || err != nil || rerr != nil {
			return p, fmt.Errorf("budget %q: want regexp=duration", rule)
		}
		p.budgets = append(p.budgets, budgetRule{re, dur})
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return p, fmt.Errorf("-pkg: %w", err)
		}
		p.only = re
	}
	return p, nil
}

// budgetOf is the time one run of the package may take: the first rule
// that matches, else the default.
func (p plan) budgetOf(path string) time.Duration {
	for _, r := range p.budgets {
		if r.pattern.MatchString(path) {
			return r.budget
		}
	}
	return p.budget
}

var modeFlags = map[string][]string{
	"race":    {"-race"},
	"cover":   {"-cover"},
	"shuffle": {"-shuffle=on"},
	// all is every stress of the three at once, in one row: for the
	// packages whose three rows would take hours.
	"all": {"-race", "-cover", "-shuffle=on"},
}

// result is one package's runs in one mode.
type result struct {
	mode string
	tally
	wall time.Duration
	log  string // the kept output, when it failed
	err  error  // go test could not be run or read
}

func (r result) failed(count int) int {
	if r.err != nil {
		return count
	}
	return r.tally.failedRuns(count)
}

func (r result) summary(count int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d runs, %d failed", r.Runs, r.failed(count))
	if r.Panic != "" {
		fmt.Fprintf(&b, "; %s", r.Panic)
	}
	if r.Build != "" {
		fmt.Fprintf(&b, "; %s", r.Build)
	}
	if r.err != nil {
		fmt.Fprintf(&b, "; %v", r.err)
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "\n    FAIL %s", f)
	}
	if r.log != "" {
		fmt.Fprintf(&b, "\n    output: %s", r.log)
	}
	return b.String()
}

// runPackage runs go test -json -count=count on p in mode m, with a
// -timeout of count × budget (and, should go test itself hang, a kill of
// its process group a minute later).
func runPackage(p pkg, m string, count int, budget time.Duration, logs string) result {
	timeout := time.Duration(count) * budget
	args := append([]string{"test", "-json", fmt.Sprintf("-count=%d", count), "-timeout=" + timeout.String()}, modeFlags[m]...)
	args = append(args, p.path)
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = p.dir
	killTreeOnCancel(cmd)
	cmd.WaitDelay = 10 * time.Second
	cmd.Stderr = os.Stderr
	res := result{mode: m}
	out, err := cmd.StdoutPipe()
	if err != nil {
		res.err = err
		return res
	}
	name := filepath.Join(logs, strings.NewReplacer("/", "_", ".", "_").Replace(p.path)+"."+m+".json")
	raw, err := os.Create(name)
	if err != nil {
		res.err = err
		return res
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		raw.Close()
		res.err = err
		return res
	}
	res.tally, res.err = readTally(out, raw)
	werr := cmd.Wait()
	res.wall = time.Since(start)
	raw.Close()
	if ctx.Err() != nil {
		res.err = fmt.Errorf("go test killed after %v", timeout+time.Minute)
	} else if res.err == nil && werr != nil && res.Finished && res.Passed {
		res.err = werr
	}
	if res.failed(count) > 0 {
		res.log = name
	} else {
		os.Remove(name)
	}
	return res
}

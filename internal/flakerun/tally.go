package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (test2json) output.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// tally is what one `go test -count=N -json` run of a package came to.
type tally struct {
	// Runs is how many passes over the package's tests started (the
	// highest iteration any top-level test reached; with -count=N and no
	// crash, N).
	Runs int
	// FailedRuns are the iterations (1-based) in which a top-level test
	// failed.
	FailedRuns []int
	// Failures names each failed top-level test with its iteration.
	Failures []string
	// Finished is set when go test reported the package's end (pass or
	// fail); Passed when that end was a pass.
	Finished, Passed bool
	// Panic is the first "panic: " line of the output (a -timeout panic
	// with its goroutine dump, or a test's panic), Build the build
	// failure, Shuffle the -shuffle seed line.
	Panic, Build, Shuffle string
	// NoTests is set when the package has no test to run.
	NoTests bool
	// Elapsed is the package's wall time as go test reports it.
	Elapsed time.Duration
	// Slowest is the longest single top-level test run, and its name.
	Slowest     time.Duration
	SlowestTest string
}

// readTally reads a `go test -json` stream of one package, copying the
// raw lines to raw (nil: not kept).
func readTally(r io.Reader, raw io.Writer) (tally, error) {
	var t tally
	started := map[string]int{} // top-level test → runs started
	failed := map[int]bool{}    // iterations with a failure
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if raw != nil {
			_, _ = raw.Write(append(line, '\n'))
		}
		var ev event
		if json.Unmarshal(line, &ev) != nil {
			continue
		}
		topLevel := ev.Test != "" && !strings.Contains(ev.Test, "/")
		switch ev.Action {
		case "run":
			if topLevel {
				started[ev.Test]++
				t.Runs = max(t.Runs, started[ev.Test])
			}
		case "pass", "fail", "skip":
			d := time.Duration(ev.Elapsed * float64(time.Second))
			switch {
			case ev.Test == "":
				t.Finished, t.Passed, t.Elapsed = true, ev.Action != "fail", d
				t.NoTests = t.NoTests || ev.Action == "skip"
			case topLevel:
				if ev.Action == "fail" {
					it := started[ev.Test]
					failed[it] = true
					t.Failures = append(t.Failures, fmt.Sprintf("%s (run %d)", ev.Test, it))
				}
				if d > t.Slowest {
					t.Slowest, t.SlowestTest = d, ev.Test
				}
			}
		case "output":
			out := strings.TrimSpace(ev.Output)
			switch {
			case t.Panic == "" && strings.HasPrefix(out, "panic: "):
				t.Panic = out
			case strings.HasPrefix(out, "-test.shuffle "):
				t.Shuffle = out
			case strings.HasPrefix(out, "testing: warning: no tests to run"):
				t.NoTests = true
			}
		case "build-fail":
			t.Build = "build failed"
		}
	}
	for it := range failed {
		t.FailedRuns = append(t.FailedRuns, it)
	}
	sort.Ints(t.FailedRuns)
	return t, sc.Err()
}

// failedRuns is how many of count runs failed: those with a failed test,
// and every run that never finished when the binary ended early (a
// -timeout panic, a crash, a build failure).
func (t tally) failedRuns(count int) int {
	n := len(t.FailedRuns)
	if t.Finished && t.Passed {
		return 0
	}
	if lost := count - t.Runs; lost > 0 && !t.NoTests {
		n += lost
	}
	if n == 0 && t.Finished && !t.Passed {
		n = 1 // failed outside any test (TestMain, a leak check at exit)
	}
	return n
}

package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// row is one package's results, one per mode.
type row struct {
	pkg     pkg
	results []result
}

// printTable writes the runs and failed runs of every package in every
// mode, then the failures, and reports whether there were any.
func printTable(w io.Writer, modes []string, rows []row, count int) bool {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "package\t")
	for _, m := range modes {
		fmt.Fprintf(tw, "%s runs\tfailed\ts/run\t", m)
	}
	fmt.Fprintln(tw, "slowest test (s)\t")
	var failures []string
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t", shortName(r.pkg.path))
		var slowest time.Duration
		for _, res := range r.results {
			perRun := 0.0
			if res.Runs > 0 {
				perRun = res.Elapsed.Seconds() / float64(res.Runs)
			}
			fmt.Fprintf(tw, "%d\t%d\t%.1f\t", res.Runs, res.failed(count), perRun)
			slowest = max(slowest, res.Slowest)
			if res.failed(count) > 0 {
				failures = append(failures, fmt.Sprintf("%s %s: %s", r.pkg.path, res.mode, res.summary(count)))
			}
		}
		fmt.Fprintf(tw, "%.1f\t\n", slowest.Seconds())
	}
	tw.Flush()
	if len(failures) > 0 {
		fmt.Fprintln(w, "\nFailures:")
		for _, f := range failures {
			fmt.Fprintln(w, "  "+f)
		}
	}
	return len(failures) > 0
}

// shortName drops the module path's common prefix.
func shortName(path string) string {
	if rest, ok := strings.CutPrefix(path, "github.com/mcpvisor/mcpvisor/"); ok {
		return rest
	}
	if path == "github.com/mcpvisor/mcpvisor" {
		return "(root)"
	}
	return path
}

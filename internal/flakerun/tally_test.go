package main

import (
	"strings"
	"testing"
)

// A -count=3 stream in which one test fails in the second run, a
// subtest's failure counts once (for its top-level test), and the
// package fails.
func TestTallyCountsFailedRuns(t *testing.T) {
	stream := `{"Action":"start","Package":"p"}
{"Action":"output","Package":"p","Output":"-test.shuffle 1700000000\n"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.5}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"run","Package":"p","Test":"TestB/sub"}
{"Action":"pass","Package":"p","Test":"TestB/sub","Elapsed":0.1}
{"Action":"pass","Package":"p","Test":"TestB","Elapsed":0.1}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.5}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"run","Package":"p","Test":"TestB/sub"}
{"Action":"fail","Package":"p","Test":"TestB/sub","Elapsed":0.1}
{"Action":"fail","Package":"p","Test":"TestB","Elapsed":2}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.5}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"pass","Package":"p","Test":"TestB","Elapsed":0.1}
{"Action":"fail","Package":"p","Elapsed":4.2}
`
	got, err := readTally(strings.NewReader(stream), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Runs != 3 || got.failedRuns(3) != 1 || len(got.Failures) != 1 || got.Failures[0] != "TestB (run 2)" {
		t.Fatalf("runs %d, failed runs %d, failures %v; want 3, 1, [TestB (run 2)]", got.Runs, got.failedRuns(3), got.Failures)
	}
	if got.SlowestTest != "TestB" || got.Shuffle != "-test.shuffle 1700000000" || !got.Finished || got.Passed {
		t.Fatalf("%+v", got)
	}
}

// A binary that panics (a -timeout) in its second run loses that run and
// every later one.
func TestTallyCountsTheRunsAHangLost(t *testing.T) {
	stream := `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.5}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"panic: test timed out after 1m0s\n"}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":60}
{"Action":"fail","Package":"p","Elapsed":61}
`
	got, err := readTally(strings.NewReader(stream), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := got.failedRuns(20); n != 19 {
		t.Fatalf("failed runs %d, want 19 (run 2 and the 18 never started)", n)
	}
	if got.Panic != "panic: test timed out after 1m0s" {
		t.Fatalf("panic %q", got.Panic)
	}
}

//go:build !unix

package main

// raiseFileLimit does nothing where there is no descriptor limit to lift
// (the benchmark reads /proc, so it measures on Linux only).
func raiseFileLimit() {}

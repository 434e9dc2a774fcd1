//go:build race

package main

// raceEnabled: the tests run with -race, so the binary under test is built
// with it too.
const raceEnabled = true

//go:build race

package gateway_test

// raceEnabled: the tests run with -race, which makes scanning JSON some
// 15 times slower; the tests that send hundreds of MB scale down.
const raceEnabled = true

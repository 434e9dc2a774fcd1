// Package interop decides what a test does when a peer it talks to (an
// npm server, an official SDK, the Inspector, Claude Code) is not
// installed: `make test` installs every peer and sets
// MCPVISOR_REQUIRE_INTEROP, so there a missing peer is a failure; a bare
// `go test` on a machine without them skips.
package interop

import (
	"os"
	"testing"
)

// Required reports whether a missing peer fails the test
// (MCPVISOR_REQUIRE_INTEROP is set, as make test sets it).
func Required() bool {
	return os.Getenv("MCPVISOR_REQUIRE_INTEROP") != ""
}

// Missing ends the test for a missing peer, msg saying which and how to
// install it: a failure when Required, a skip otherwise.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if Required() {
		t.Fatal(msg + "; MCPVISOR_REQUIRE_INTEROP makes this a failure")
	}
	t.Skip(msg)
}

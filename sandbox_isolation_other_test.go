//go:build !linux

package mcpvisor_test

import (
	"testing"

	"github.com/mcpvisor/mcpvisor"
)

// peers and probeIsolation: the isolation probes are Linux's (see
// sandbox_isolation_test.go); elsewhere TestSandboxProbes runs only its
// control case, without them.
type peers struct{}

func startPeers(*testing.T, string) peers { return peers{} }

func probeIsolation(*testing.T, *mcpvisor.Supervisor, bool, string, peers) {}

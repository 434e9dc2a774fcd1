//go:build !linux

package dashboard_test

import "github.com/mcpvisor/mcpvisor"

// serverPIDOrZero returns 0: finding the server's process reads /proc,
// which only Linux has (tests that need it skip elsewhere).
func serverPIDOrZero(*mcpvisor.Supervisor, string) int { return 0 }

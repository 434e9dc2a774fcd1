package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/config"
	"github.com/mcpvisor/mcpvisor/transports"
)

// sandboxJSON is the sandbox a pending entry would run under, in trust
// --json: the mechanism asked for, its paths as written, and its limits
// with the defaults filled in. It is null when the entry would run
// unconfined.
type sandboxJSON struct {
	Mechanism string   `json:"mechanism"`
	Write     []string `json:"write"`
	Read      []string `json:"read"`
	Network   bool     `json:"network"`
	MemoryMB  int      `json:"memoryMB"`
	Processes int      `json:"processes"`
	OpenFiles int      `json:"openFiles"`
	// RequiredBy names the policy requiring the sandbox (requireSandbox),
	// empty when the entry asks for it itself.
	RequiredBy string `json:"requiredBy,omitempty"`
}

// pendingSandbox returns what trust --json shows of p's sandbox: nil for
// none.
func pendingSandbox(p config.PendingServer) *sandboxJSON {
	sb := p.Sandbox
	if sb == nil || !sb.Enabled {
		return nil
	}
	mem, procs, files := sb.Limits()
	return &sandboxJSON{Mechanism: string(mechanismOf(sb)), Write: append([]string{}, sb.Write...), Read: append([]string{}, sb.Read...),
		Network: sb.Network, MemoryMB: int(mem >> 20), Processes: procs, OpenFiles: files, RequiredBy: p.SandboxRequiredBy}
}

// mechanismOf is the mechanism a sandbox asks for (auto when it names
// none).
func mechanismOf(sb *transports.Sandbox) transports.SandboxMechanism {
	if sb.Mechanism == "" {
		return transports.SandboxAuto
	}
	return sb.Mechanism
}

// runsHere reports whether p's entry starts a process here (a stdio
// server), the only kind a sandbox confines.
func runsHere(p config.PendingServer) bool {
	var sc mcpvisor.ServerConfig
	if json.Unmarshal(p.Entry, &sc) != nil {
		return true // validated when loaded; say the safe thing
	}
	return sc.Kind() == transports.TypeStdio
}

// describeSandbox is the one line trust shows of p's sandbox, as in
// "auto; write ./out, ~/.npm; read none; no network; memory 512 MB".
func describeSandbox(p config.PendingServer) string {
	sb := pendingSandbox(p)
	if sb == nil {
		if p.Sandbox != nil {
			return `none ("sandbox": false): it would run unconfined`
		}
		if !runsHere(p) {
			return "none (a remote server runs nothing here)"
		}
		return "none: it would run unconfined"
	}
	paths := func(ps []string) string {
		if len(ps) == 0 {
			return "none"
		}
		return strings.Join(ps, ", ")
	}
	network := "no network"
	if sb.Network {
		network = "network allowed"
	}
	parts := []string{sb.Mechanism, "write " + paths(sb.Write), "read " + paths(sb.Read), network, fmt.Sprintf("memory %d MB", sb.MemoryMB)}
	if p.Sandbox.Processes != 0 {
		parts = append(parts, fmt.Sprintf("%d processes", sb.Processes))
	}
	if p.Sandbox.OpenFiles != 0 {
		parts = append(parts, fmt.Sprintf("%d open files", sb.OpenFiles))
	}
	line := strings.Join(parts, "; ")
	if sb.RequiredBy != "" {
		line += " (required by " + sb.RequiredBy + ")"
	}
	return line
}

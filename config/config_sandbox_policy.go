package config

import (
	"fmt"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
)

// validRequireSandbox checks a requireSandbox value.
func validRequireSandbox(v string) *Error {
	switch v {
	case "", RequireSandboxProject, RequireSandboxAll:
		return nil
	}
	return &Error{Path: "requireSandbox", Err: fmt.Errorf("%q: want %q or %q", v, RequireSandboxProject, RequireSandboxAll)}
}

// requiresSandbox reports whether p requires the server, of an untrusted
// layer or not, configured as sc, to run confined.
func (p *Policy) requiresSandbox(untrusted bool, sc mcpvisor.ServerConfig) bool {
	if sc.Kind() != transports.TypeStdio {
		return false
	}
	switch p.RequireSandbox {
	case RequireSandboxAll:
		return true
	case RequireSandboxProject:
		return untrusted
	}
	return false
}

// requireSandbox applies the policies' requireSandbox to the server
// name, configured as *sc (held when pending is not nil, whose Sandbox is
// then the one it would run under): a server required to run confined
// that has no sandbox gets the default one, and one whose sandbox is
// disabled is refused with the reason. It changes *sc or *pending only
// when the server is not refused.
func requireSandbox(policies []Policy, name, layer string, untrusted bool, sc *mcpvisor.ServerConfig, pending *PendingServer) (refused bool, reason string) {
	for i := range policies {
		p := &policies[i]
		if !p.requiresSandbox(untrusted, *sc) {
			continue
		}
		sb := sc.Sandbox
		if pending != nil {
			sb = pending.Sandbox
		}
		switch {
		case sb != nil && !sb.Enabled:
			return true, p.reason(fmt.Sprintf(`requireSandbox is %q: server %q (%q layer) sets "sandbox": false and may not run unconfined`,
				p.RequireSandbox, name, layer))
		case pending != nil:
			if sb == nil {
				pending.Sandbox = &transports.Sandbox{Enabled: true}
			}
			if pending.SandboxRequiredBy == "" {
				pending.SandboxRequiredBy = p.Source
			}
		case sb == nil:
			sc.Sandbox = &transports.Sandbox{Enabled: true}
		}
	}
	return false, ""
}

package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/transports"
)

// What config layers may say about trust. A trusted layer (the user's
// file, the managed file, a file named with --config, a host layer marked
// Trusted) sets a server's trust level, sandbox and permission rules as it
// likes. An untrusted layer (the project's .mcp.json and .mcp.local.json,
// a host layer not marked Trusted) may add servers and rules, but cannot
// raise what the trusted layers set:
//
//   - a server entry's trust is at most the trust the trusted layers'
//     entry of that name has (the default, empty level, when they have
//     none): trusted > default > sandbox > untrusted, and a higher level
//     is lowered to it (to untrusted for a remote server under a
//     "sandbox" ceiling: it cannot be confined, so every call asks);
//   - a server the trusted layers run confined (a "sandbox", or trust
//     "sandbox") keeps the trusted entry's sandbox whatever the
//     untrusted entry says about it ("sandbox": false, none, another);
//   - its permission rules count for ask and deny only: its allow rules
//     are dropped (an allow would exempt a tool from asking).
//
// Config.Lowered says which entries were lowered, and why.

// parsePermissions decodes the top-level "permissions" member of a file
// (absent: no rules). The error lacks File.
func parsePermissions(top map[string]json.RawMessage) (mcpvisor.PermissionRules, *Error) {
	raw, ok := top["permissions"]
	if !ok || jsonKind(raw) == "null" {
		return mcpvisor.PermissionRules{}, nil
	}
	var r mcpvisor.PermissionRules
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return mcpvisor.PermissionRules{}, &Error{Path: "permissions", Err: fmt.Errorf(`want {"allow": [...], "ask": [...], "deny": [...]} of glob patterns: %w`, err)}
	}
	if err := r.Validate(); err != nil {
		return mcpvisor.PermissionRules{}, &Error{Path: "permissions", Err: err}
	}
	return r, nil
}

// addPermissions merges a layer's rules into the config's: all of a
// trusted layer's, the ask and deny rules of an untrusted one.
func (c *Config) addPermissions(r mcpvisor.PermissionRules, trusted bool) {
	if trusted {
		c.Permissions.Allow = append(c.Permissions.Allow, r.Allow...)
	}
	c.Permissions.Ask = append(c.Permissions.Ask, r.Ask...)
	c.Permissions.Deny = append(c.Permissions.Deny, r.Deny...)
}

// lowerUntrusted applies the trusted layers' entry base (nil: none) to the
// entry sc of an untrusted layer (see above), and records in
// c.Lowered what it changed.
func (c *Config) lowerUntrusted(name string, sc *mcpvisor.ServerConfig, base *mcpvisor.ServerConfig) {
	if sc.NeedsApproval != "" || sc.Disabled {
		return // never started: nothing to lower
	}
	var ceiling string
	if base != nil {
		ceiling = base.Trust
	}
	var why []string
	t := mcpvisor.LeastTrusted(sc.Trust, ceiling)
	if t == mcpvisor.TrustSandbox && sc.Kind() != transports.TypeStdio {
		// A remote server cannot be confined: every call asks instead.
		t = mcpvisor.TrustUntrusted
	}
	if t != sc.Trust {
		why = append(why, fmt.Sprintf("trust %q lowered to %q", sc.Trust, t))
		sc.Trust = t
	}
	if base != nil && confined(base) && sc.Kind() == transports.TypeStdio && !sameSandbox(sc.Sandbox, base.Sandbox) {
		sb := *base.Sandbox
		sb.Write, sb.Read = slices.Clone(sb.Write), slices.Clone(sb.Read)
		sc.Sandbox = &sb
		why = append(why, "the user's sandbox kept")
	}
	if sc.Trust == mcpvisor.TrustSandbox && sc.Sandbox == nil && sc.Kind() == transports.TypeStdio {
		sc.Sandbox = &transports.Sandbox{Enabled: true}
	}
	if len(why) > 0 {
		if c.Lowered == nil {
			c.Lowered = map[string]string{}
		}
		c.Lowered[name] = fmt.Sprintf("%s (the trusted layers' entry is the ceiling)", joinWhy(why))
	}
}

// confined reports whether a trusted entry runs its server confined.
func confined(sc *mcpvisor.ServerConfig) bool {
	return sc.Kind() == transports.TypeStdio && sc.Sandbox != nil && sc.Sandbox.Enabled
}

func sameSandbox(a, b *transports.Sandbox) bool {
	if a == nil || b == nil {
		return a == b
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return a.Enabled == b.Enabled && string(ja) == string(jb)
}

func joinWhy(why []string) string {
	out := why[0]
	for _, w := range why[1:] {
		out += "; " + w
	}
	return out
}

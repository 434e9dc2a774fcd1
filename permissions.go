package mcpvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sync"
	"sync/atomic"
)

// Trust levels and permission rules decide, before every call of a
// server's tool, whether it goes ahead, is refused, or needs the host's
// approval (Options.ApproveCall) first. Built-in tools (the host's own,
// the management tools) need no permission.
//
// The order of evaluation, on the tool's qualified name
// (mcp__<server>__<tool>):
//
//  1. a Deny rule that matches refuses the call (ErrCallDenied);
//  2. else an Ask rule that matches asks the host;
//  3. else an Allow rule that matches lets it go;
//  4. else the server's trust level decides: TrustUntrusted asks, any
//     other level lets it go.
//
// Deny beats ask beats allow, whatever the rules' order or how specific
// their patterns are; an Allow rule exempts a tool of an untrusted server
// from asking. Asking without an ApproveCall, or an ApproveCall that
// fails, refuses the call (ErrApprovalUnavailable); an approver that says
// no refuses it (ErrCallDenied). See docs/trust.md.

// The trust levels of ServerConfig.Trust. The empty level is the
// default: no per-call approval, tool annotations as hints, changed tool
// definitions withheld until approved.
const (
	// TrustTrusted: the host may rely on the server's tool annotations,
	// and its changed tool definitions are offered (reported) rather
	// than withheld.
	TrustTrusted = "trusted"
	// TrustUntrusted: every call of the server's tools needs the host's
	// approval (Options.ApproveCall), unless an Allow rule matches it.
	TrustUntrusted = "untrusted"
	// TrustSandbox: the server runs confined, as with "sandbox": true
	// (stdio servers only).
	TrustSandbox = "sandbox"
)

// PermissionRules decide which calls of servers' tools go ahead, by
// qualified tool name with path.Match globs: "mcp__*__delete_*",
// "mcp__github__*". In a config file they are the top-level
// "permissions" member; in the library, Options.Permissions.
type PermissionRules struct {
	// Allow lets matching calls go without asking (a tool of an
	// untrusted server included), unless a Deny or Ask rule matches.
	Allow []string `json:"allow,omitempty"`
	// Ask has the host approve each matching call (Options.ApproveCall),
	// unless a Deny rule matches.
	Ask []string `json:"ask,omitempty"`
	// Deny refuses matching calls (ErrCallDenied).
	Deny []string `json:"deny,omitempty"`
}

// CallApproval is one call the host is asked to approve.
type CallApproval struct {
	// Tool is the qualified name the model called; Server and ServerTool
	// are the server's name and its own name for the tool.
	Tool, Server, ServerTool string
	// Arguments are the call's arguments (JSON) as they will be sent.
	Arguments json.RawMessage
	// Reason says why approval is needed: the ask rule that matched, or
	// the server's trust level.
	Reason string
}

// trustRank orders the trust levels, least trusted first; -1 for a
// level that is not one.
func trustRank(level string) int {
	switch level {
	case TrustUntrusted:
		return 0
	case TrustSandbox:
		return 1
	case "":
		return 2
	case TrustTrusted:
		return 3
	}
	return -1
}

// validTrust reports whether level is a trust level ("" included).
func validTrust(level string) bool { return trustRank(level) >= 0 }

// LeastTrusted returns the less trusted of two trust levels.
func LeastTrusted(a, b string) string {
	if trustRank(b) < trustRank(a) {
		return b
	}
	return a
}

// Validate reports the first pattern that is not a valid glob.
func (r PermissionRules) Validate() error {
	for _, list := range []struct {
		name     string
		patterns []string
	}{{"allow", r.Allow}, {"ask", r.Ask}, {"deny", r.Deny}} {
		for i, p := range list.patterns {
			if _, err := path.Match(p, ""); err != nil {
				return fmt.Errorf("permissions.%s[%d] %q: %w", list.name, i, p, err)
			}
		}
	}
	return nil
}

// empty reports whether there is no rule.
func (r PermissionRules) empty() bool { return len(r.Allow)+len(r.Ask)+len(r.Deny) == 0 }

// The decisions of PermissionRules.Decide.
const (
	decisionAllow = "allow"
	decisionAsk   = "ask"
	decisionDeny  = "deny"
)

// Decide says what the rules decide for a call of the tool with
// qualified name at the server's trust level: "allow", "ask" or "deny",
// and why (the rule that matched, or the trust level; empty when
// nothing matched and the level asks nothing).
func (r PermissionRules) Decide(name, trust string) (decision, why string) {
	if p, ok := firstMatch(r.Deny, name); ok {
		return decisionDeny, fmt.Sprintf("deny rule %q", p)
	}
	if p, ok := firstMatch(r.Ask, name); ok {
		return decisionAsk, fmt.Sprintf("ask rule %q", p)
	}
	if p, ok := firstMatch(r.Allow, name); ok {
		return decisionAllow, fmt.Sprintf("allow rule %q", p)
	}
	if trust == TrustUntrusted {
		return decisionAsk, `the server's trust is "untrusted"`
	}
	return decisionAllow, ""
}

func firstMatch(patterns []string, name string) (string, bool) {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return p, true
		}
	}
	return "", false
}

// Errors of the permission check.
var (
	// ErrCallDenied: a deny rule matched the call, or the host's approver
	// said no.
	ErrCallDenied = errors.New("mcpvisor: call denied")
	// ErrApprovalUnavailable: the call needs the host's approval and none
	// could be had: no Options.ApproveCall, or it failed (the gateway's:
	// the client declared no elicitation, or did not answer).
	ErrApprovalUnavailable = errors.New("mcpvisor: the call needs approval and none could be asked")
)

// permissionSet is a set of rules with the decisions already taken:
// matching a name against globs costs about a microsecond per pattern
// (path.Match), so each (trust level, tool) is decided once per set. The
// names are the pool's tools (permit runs after the tool was found), so
// the cache is bounded by the pool's size for each of the four levels.
//
// Concurrency: rules are immutable; each decided map is copied on write
// under mu and read without a lock. SetPermissions replaces the whole
// set.
type permissionSet struct {
	rules   PermissionRules
	empty   bool
	mu      sync.Mutex                            // serializes writers of decided
	decided [4]atomic.Pointer[map[string]decided] // by trustRank: name → decision
}

type decided struct {
	decision string
	why      string
}

func newPermissionSet(r PermissionRules) *permissionSet {
	return &permissionSet{rules: r, empty: r.empty()}
}

// decide is rules.Decide, remembered.
func (p *permissionSet) decide(name, trust string) (decision, why string) {
	rank := trustRank(trust)
	if rank < 0 {
		return p.rules.Decide(name, trust) // not a level: never configured
	}
	if m := p.decided[rank].Load(); m != nil {
		if d, ok := (*m)[name]; ok {
			return d.decision, d.why
		}
	}
	d, why := p.rules.Decide(name, trust)
	p.mu.Lock()
	old := p.decided[rank].Load()
	m := make(map[string]decided, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[name] = decided{d, why}
	p.decided[rank].Store(&m)
	p.mu.Unlock()
	return d, why
}

func lenOf(m *map[string]decided) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// callPermissions decides whether a call may go ahead: the rules
// (Options.Permissions, then SetPermissions) and the host's approver
// (Options.ApproveCall) for those that ask.
//
// Concurrency: approve is set by Start and not written after; rules is
// replaced whole by SetPermissions and read by every call without a lock.
type callPermissions struct {
	rules   atomic.Pointer[permissionSet] // never nil after Start
	approve func(context.Context, CallApproval) (bool, error)
}

// permit runs the permission check for a call of tool (its server's own
// name) of server h under the qualified name: nil when it may go ahead.
func (cp *callPermissions) permit(ctx context.Context, name string, h *serverHandle, tool string, args json.RawMessage) error {
	set := cp.rules.Load()
	trust := h.view.Load().cfg.Trust
	if set.empty && trust != TrustUntrusted {
		return nil // the hot path: two loads and two comparisons
	}
	decision, why := set.decide(name, trust)
	switch decision {
	case decisionAllow:
		return nil
	case decisionDeny:
		return fmt.Errorf("%w: %s (%s)", ErrCallDenied, name, why)
	}
	if cp.approve == nil {
		return fmt.Errorf("%w: %s (%s; no approver is configured)", ErrApprovalUnavailable, name, why)
	}
	ok, err := cp.approve(ctx, CallApproval{Tool: name, Server: h.name, ServerTool: tool, Arguments: args, Reason: why})
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s (%s): %w", ErrApprovalUnavailable, name, why, err)
	case !ok:
		return fmt.Errorf("%w: %s (%s): the approver said no", ErrCallDenied, name, why)
	}
	return nil
}

// SetPermissions replaces the permission rules (Options.Permissions);
// calls that start afterwards are checked against the new ones (a
// config reload, say). An invalid pattern is an error and changes
// nothing.
func (s *Supervisor) SetPermissions(rules PermissionRules) error {
	if err := rules.Validate(); err != nil {
		return err
	}
	s.permissions.rules.Store(newPermissionSet(rules))
	return nil
}

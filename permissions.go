package mcpvisor

import (
	"encoding/json"
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
// their patterns are. See docs/trust.md.

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

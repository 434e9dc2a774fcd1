package mcpvisor

import (
	"github.com/mcpvisor/mcpvisor/protocol"
)

// Tool is one entry of the tool pool.
type Tool struct {
	// Name is what a model calls: the built-in's own name, or the
	// qualified name mcp__<server>__<tool> (at most MaxNameLength
	// characters; see QualifiedName).
	Name string
	// Builtin is set for the host's own tools (Options.Builtins).
	Builtin bool
	// Server is the configured server name (empty for a built-in).
	Server string
	// Trusted reports whether the server is marked trusted, so that the
	// annotations may be relied on.
	Trusted bool
	// Deferred reports that the server is configured with "defer": true:
	// the tool is meant to be found by search, not listed up front (see
	// ServerConfig.Defer).
	Deferred bool
	// Definition is the tool as the server lists it (Definition.Name is
	// the server's own name for it), its description cut to
	// Options.MaxDescriptionLength.
	Definition protocol.Tool
}

// Resource is a resource with the server that offers it.
type Resource struct {
	Server   string
	Resource protocol.Resource
}

// ResourceTemplate is a resource template with the server that offers it.
type ResourceTemplate struct {
	Server   string
	Template protocol.ResourceTemplate
}

// Prompt is a prompt with the server that offers it.
type Prompt struct {
	// Name is the qualified name: mcp__<server>__<prompt>.
	Name   string
	Server string
	Prompt protocol.Prompt
}

// SetResult says what SetServers did. Every name given to SetServers, and
// every name it removed, is in exactly one of Added, Removed, Changed,
// Unchanged and Errors; each list is sorted.
type SetResult struct {
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	// Changed servers had a config that differs; those whose change
	// affects the connection (anything but trust, tools, timeoutMs, lazy,
	// reconnect and scope; but a trust changed to or from "sandbox" does)
	// are also in Reconnected: their connection was replaced. The others
	// kept it.
	Changed     []string `json:"changed"`
	Reconnected []string `json:"reconnected,omitempty"`
	Unchanged   []string `json:"unchanged"`
	// Errors holds the servers whose config was rejected: a new one was
	// not started, a running one keeps its old config. In JSON it is
	// "errors", each server's name with its error's message (see
	// MarshalJSON).
	Errors map[string]error `json:"-"`
	// Settled is set when the caller asked to wait and every server
	// settled in time; Unsettled then names those still pending or
	// connecting when the wait ended (they go on connecting).
	Settled   bool     `json:"settled,omitempty"`
	Unsettled []string `json:"unsettled,omitempty"`
}

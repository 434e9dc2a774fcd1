//go:build darwin

package config

// DefaultManagedFile is the managed (administrator) config file that
// Load looks for when Options.ManagedFile is empty. When it
// exists, its server policy applies to every load, and when it holds a
// server map it is the only file loaded (see Load). On macOS it is
// in the system's Application Support folder, where administrators'
// managed files go (as Claude Code's managed-mcp.json does).
const DefaultManagedFile = "/Library/Application Support/mcpvisor/managed-mcp.json"

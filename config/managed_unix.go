//go:build !windows && !darwin

package config

// DefaultManagedFile is the managed (administrator) config file that
// Load looks for when Options.ManagedFile is empty. When it
// exists, its server policy applies to every load, and when it holds a
// server map it is the only file loaded (see Load). On Linux and
// other Unix systems it is under /etc.
const DefaultManagedFile = "/etc/mcpvisor/managed-mcp.json"

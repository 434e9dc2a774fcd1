//go:build !windows && !darwin

package mcpvisor

// DefaultManagedFile is the managed (administrator) config file that
// LoadConfig looks for when LoadOptions.ManagedFile is empty. When it
// exists, its server policy applies to every load, and when it holds a
// server map it is the only file loaded (see LoadConfig). On Linux and
// other Unix systems it is under /etc.
const DefaultManagedFile = "/etc/mcpvisor/managed-mcp.json"

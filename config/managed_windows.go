//go:build windows

package config

// DefaultManagedFile is the managed (administrator) config file that
// Load looks for when Options.ManagedFile is empty. When it
// exists, its server policy applies to every load, and when it holds a
// server map it is the only file loaded (see Load). On Windows it is
// in the machine-wide ProgramData folder, which only administrators may
// write.
const DefaultManagedFile = `C:\ProgramData\mcpvisor\managed-mcp.json`

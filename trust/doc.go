// Package trust keeps a user's trust decisions about MCP servers in a
// state directory that belongs to the user, never to a project:
//
//   - approvals of project servers: a server entry from an untrusted
//     config layer (a project's .mcp.json) starts only once the user has
//     approved that entry, as written (its raw JSON, hashed), in that
//     project directory (approvals.go);
//   - tool pins: the hash of each tool definition a server listed when it
//     was first seen, so that a later change of a definition (the "rug
//     pull" of tool poisoning) or a tool added later is noticed and held
//     for the user's review (pins.go).
//
// The files are JSON, mode 0600, in a directory of mode 0700; every write
// replaces a file by rename under a lock held across processes, so a CLI
// approving while a supervisor pins loses nothing.
//
// The package has no goroutines and reads no environment variable; the
// default directory (DefaultDir) comes from os.UserHomeDir.
package trust

// Package testserver is a small MCP server for tests, built on mcpserver:
// the handful of tools tests outside bench/ call (echo, add, fail, sleep,
// announce, meta), served over stdio by a re-executed test binary
// (Command, with Main in the test's TestMain) or over Streamable HTTP in
// process (Serve, Handler).
//
// It misbehaves in no way: tests of faults use bench/mockserver.
package testserver

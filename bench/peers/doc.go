// Package peers benchmarks mcpvisor against the other Go MCP client
// libraries — the official go-sdk and mark3labs/mcp-go — over stdio,
// against one and the same mock server binary (cmd/mockserver, built from
// bench/mockserver). It is a nested module so that the peers never become
// dependencies of mcpvisor itself. See README.md.
package peers

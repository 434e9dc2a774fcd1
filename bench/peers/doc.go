// Package peers benchmarks mcpvisor against the other Go MCP client
// libraries — the official go-sdk and mark3labs/mcp-go — against one and
// the same mock server binary (cmd/mockserver, built from
// bench/mockserver): over stdio (a server process per session) and over
// Streamable HTTP (one server process per benchmark, serving both the
// session eras and the stateless one), including what idle sessions cost
// a client. Package harness holds the clients and the benchmark runner
// behind `mcpvisor bench` (cmd/bench). It is a nested module so that the
// peers never become dependencies of mcpvisor itself. See README.md.
package peers

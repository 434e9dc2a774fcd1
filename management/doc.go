// Package management offers a host's model the management tools: tools
// that let the model see and follow the MCP resources of a Supervisor's
// servers and bring configured servers in and out of the tool pool. They
// are mcpvisor.BuiltinTools, so they join the pool through
// mcpvisor.Options.Builtins (and `mcpvisor supervise --management-tools`
// offers them through the gateway):
//
//	var sup atomic.Pointer[mcpvisor.Supervisor]
//	opts.Builtins = append(opts.Builtins, management.Tools(sup.Load)...)
//
// Six of them take and return the shapes the Claude Agent SDK declares in
// sdk-tools.d.ts (ListMcpResourcesInput/Output, ReadMcpResource…,
// SubscribeMcpResource…, UnsubscribeMcpResource…, SubscribePolling…,
// UnsubscribePolling…: the same members, required as there, more optional
// ones at most; checked against the published SDK, version 0.2.76; its
// releases 0.2.112 and 0.3.332 no longer declare the subscribing tools).
// ListMcpResourceTemplates and connect_mcp are mcpvisor's own.
//
// The tools act only through the Supervisor's public methods. Concurrency:
// the tools run on the caller's goroutine, concurrently with each other;
// the tools of one Tools call share their resource subscription ids, kept
// under a mutex.
package management

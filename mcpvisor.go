// Package mcpvisor keeps an agent host connected to every MCP server it is
// configured with: it starts them, speaks their protocol era, notices
// failure, and tells subscribers what changed. The host sees one tool pool
// and one event stream; it never handles a transport.
package mcpvisor

import "github.com/mcpvisor/mcpvisor/actors"

// ServerConfig is one entry of an .mcp.json "mcpServers" map.
type ServerConfig = actors.ServerConfig

// ToolFilter selects a server's tools by glob.
type ToolFilter = actors.ToolFilter

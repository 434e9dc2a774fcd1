package protocol

import "slices"

// The MCP protocol versions mcpvisor speaks. Versions are dates, so string
// order is chronological order.
const (
	Version20241105 = "2024-11-05" // initialize; stdio and HTTP+SSE
	Version20250326 = "2025-03-26" // Streamable HTTP, session ids, annotations
	Version20250618 = "2025-06-18" // MCP-Protocol-Version header, structured output, elicitation
	Version20251125 = "2025-11-25" // SSE polling, URL elicitation, tasks, icons
	Version20260728 = "2026-07-28" // server/discover, no handshake, per-request _meta
)

// supportedVersions lists every version mcpvisor speaks, newest first.
var supportedVersions = []string{
	Version20260728,
	Version20251125,
	Version20250618,
	Version20250326,
	Version20241105,
}

// SupportedVersions returns the versions mcpvisor speaks, newest first. The
// slice is a copy.
func SupportedVersions() []string { return slices.Clone(supportedVersions) }

// LatestVersion is the newest version mcpvisor speaks.
const LatestVersion = Version20260728

// LatestHandshakeVersion is the newest version negotiated with initialize.
const LatestHandshakeVersion = Version20251125

// IsSupported reports whether mcpvisor speaks version v.
func IsSupported(v string) bool { return slices.Contains(supportedVersions, v) }

// UsesDiscover reports whether version v is of the stateless era
// (2026-07-28 and later): no initialize handshake, server/discover instead,
// and the protocol version, client info and capabilities in every request's
// _meta.
func UsesDiscover(v string) bool { return v >= Version20260728 }

// Negotiate returns the newest version that mcpvisor and a peer offering
// offered both speak, or "" when they share none.
func Negotiate(offered []string) string {
	for _, v := range supportedVersions {
		if slices.Contains(offered, v) {
			return v
		}
	}
	return ""
}

// Keys of the request and result _meta members that carry session state in
// the stateless era.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

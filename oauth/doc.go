// Package oauth is mcpvisor's OAuth 2.1 client for MCP servers, following
// the MCP authorization specification (2025-11-25, with what 2026-07-28
// adds): WWW-Authenticate challenges, protected resource metadata
// discovery (RFC 9728), authorization server metadata discovery (RFC
// 8414, OpenID Connect Discovery) with issuer checks, client identity by
// pre-registration, Client ID Metadata Document or dynamic registration
// (RFC 7591), the authorization code flow with PKCE S256, the resource
// parameter (RFC 8707), state and iss (RFC 9207) checks, scope selection
// and step-up, client credentials with a secret or private_key_jwt (RFC
// 7523), the enterprise-managed token exchange (RFC 8693 then
// jwt-bearer), workload identity (a platform's JWT with the jwt-bearer
// grant, SEP-1933), token exchange (RFC 8693: a gateway exchanges its
// caller's access token for one for an upstream server, with the
// caller's identity; GrantTokenExchange), DPoP sender-constrained tokens with server nonces
// (RFC 9449, SEP-1932), authorization server migration (SEP-2352:
// credentials stay with the issuer that issued them), and the 2025-03-26
// fallbacks.
//
// A Source holds one MCP server's credentials and is the only code that
// talks to its authorization server; Transport puts its token on every
// HTTP request and answers the server's 401/403 challenges. Credentials
// persist in a Store (FileStore, MemoryStore), shared safely between
// processes. The package starts no goroutines. Token values never appear
// in its errors or logs, and Token/ClientInfo redact themselves when
// printed or marshalled.
package oauth

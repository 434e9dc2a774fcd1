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
//
// Its one job: obtain and keep the access token an MCP client sends to a
// server that demands authorization. A Source is the token cache
// (refresh, the single flight, the answers to 401 and 403) and holds its
// parts: authServer (discovery of the authorization server, migration,
// the client identity at it), grants (how a new token is obtained: the
// code flow, the machine grants, the token exchange), asGate (the backoff
// after the server's transient failures) and dpopState (DPoP keys and
// nonces). The package starts no goroutines: the caller's goroutines run
// it. The one that holds a Source's single-flight slot (sem) is the only
// one talking to the authorization server; the Source's mutex guards its
// state and that of authServer and grants; asGate and dpopState have
// locks of their own, taken after it (never the other way round).
package oauth

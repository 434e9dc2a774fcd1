// Package authn validates the access tokens a gateway's downstream
// clients present, making the gateway an OAuth 2.1 resource server as the
// MCP authorization specification asks: given the token of an
// "Authorization: Bearer" header, a Validator returns the caller's
// gateway.Identity, or an error that says why the token is refused.
//
// Two kinds of token are understood, from one authorization server (the
// issuer):
//   - JWT access tokens (RFC 9068), validated locally: the signature by a
//     key of the issuer's JWKS (RFC 7517), discovered from the issuer's
//     metadata (RFC 8414, or OpenID Connect discovery), cached, fetched
//     again when a token names an unknown key (rate limited) and when the
//     set is older than Options.KeysMaxAge; RS256, PS256, ES256 and
//     EdDSA, the algorithm bound to the key's type (never "none" nor an
//     HMAC with a public key); iss exact, aud containing
//     Options.Audience (the gateway's resource URI, RFC 8707), exp, nbf
//     and iat with Options.Leeway; a token that passed is remembered
//     (by its SHA-256) for Options.VerifiedCache, exp still checked at
//     each use, so that a client's next calls cost a hash.
//   - opaque tokens, by introspection (RFC 7662) with the gateway's
//     client credentials; active answers are cached for
//     Options.IntrospectionCache at most (never past the token's exp),
//     for Options.CacheSize tokens at most.
//
// A token issued for another audience is refused: the gateway never
// accepts, nor passes upstream, a token meant for someone else.
//
// The JWS verification is written here with the standard library's
// crypto (RFC 7515, 7517, 7518, 7519, 8037), so the package adds no
// dependency.
//
// Concurrency: a Validator is safe for concurrent use. Its key set is an
// immutable value behind an atomic pointer, replaced by one fetch at a
// time (fetchMu); the introspection cache has its own mutex.
package authn

// A real OAuth 2.1 / OpenID Connect authorization server for mcpvisor's
// tests: node-oidc-provider on 127.0.0.1, headless (every authorization is
// granted at once to a fixed test account), with dynamic registration,
// PKCE required, resource indicators (JWT access tokens whose aud is the
// MCP server), rotating refresh tokens with reuse detection, revocation
// and RFC 9207 iss.
//
// Environment: OIDC_RESOURCE (the MCP server URL, required), OIDC_SCOPES
// (space-separated resource scopes, default "mcp:tools"), OIDC_TTL (access
// token lifetime in seconds, default 60), OIDC_PORT (default 0: any),
// OIDC_DPOP_NONCE (set: DPoP proofs at the token endpoint must carry a
// nonce the provider issues; DPoP itself is always on in this version).
// Prints "OIDC_READY <issuer>" on stdout once it listens.
import http from "node:http";
import { randomBytes } from "node:crypto";
import { createRequire } from "node:module";

const require = createRequire(process.env.OIDC_MODULES + "/");
const { default: Provider, errors } = await import(require.resolve("oidc-provider"));

const resource = process.env.OIDC_RESOURCE;
if (!resource) {
  console.error("OIDC_RESOURCE is required");
  process.exit(2);
}
const scopes = (process.env.OIDC_SCOPES || "mcp:tools").split(" ").filter(Boolean);
const ttl = Number(process.env.OIDC_TTL || 60);
const account = "test-user";

let provider;
const server = http.createServer(async (req, res) => {
  try {
    if (req.url.startsWith("/interaction/")) {
      // Auto-approve: log the test account in and grant what is missing.
      const details = await provider.interactionDetails(req, res);
      const missing = details.prompt.details || {};
      const grant = details.grantId
        ? await provider.Grant.find(details.grantId)
        : new provider.Grant({ accountId: account, clientId: details.params.client_id });
      if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(" "));
      if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
      for (const [indicator, s] of Object.entries(missing.missingResourceScopes || {})) {
        grant.addResourceScope(indicator, s.join(" "));
      }
      const grantId = await grant.save();
      await provider.interactionFinished(
        req,
        res,
        { login: { accountId: account }, consent: { grantId } },
        { mergeWithLastSubmission: false },
      );
      return;
    }
    provider.callback()(req, res);
  } catch (err) {
    console.error("interaction failed:", err);
    res.statusCode = 500;
    res.end(String(err));
  }
});

server.listen(Number(process.env.OIDC_PORT || 0), "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  provider = new Provider(issuer, {
    findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
    cookies: { keys: ["mcpvisor-test-cookie-key"] },
    scopes: ["openid", "offline_access"],
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      revocation: { enabled: true },
      dPoP: process.env.OIDC_DPOP_NONCE
        ? { enabled: true, nonceSecret: randomBytes(32), requireNonce: () => true }
        : { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (_ctx, _client, oneOf) => oneOf ?? resource,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx, indicator) => {
          if (indicator !== resource) throw new errors.InvalidTarget();
          return {
            scope: scopes.join(" "),
            audience: resource,
            accessTokenTTL: ttl,
            accessTokenFormat: "jwt",
          };
        },
      },
    },
    pkce: { required: () => true },
    // A refresh token for every client allowed the grant (not only with
    // offline_access); rotated at every use, and a reused one revokes the
    // grant.
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed("refresh_token"),
    rotateRefreshToken: () => true,
    ttl: { AccessToken: ttl, RefreshToken: 24 * 3600, Grant: 24 * 3600, Session: 24 * 3600, Interaction: 600 },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  });
  provider.proxy = false;
  console.log(`OIDC_READY ${issuer}`);
});

process.on("SIGTERM", () => server.close(() => process.exit(0)));

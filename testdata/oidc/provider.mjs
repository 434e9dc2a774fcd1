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
// nonce the provider issues; DPoP itself is always on in this version),
// OIDC_KEYS (set: a fresh RSA, P-256 and Ed25519 signing key at every
// start, so that a restart on the same port rotates the keys; else the
// provider's development keys), OIDC_REGISTER_SCOPES (set: dynamic
// registration accepts the resource's scopes in a client's scope).
//
// For the gateway's resource-server tests it also has the client
// credentials grant, introspection, three confidential clients
// (mcpvisor-gateway, which introspects; cc-user and cc-admin, which get
// tokens for themselves; each with secret "<id>-secret"), groups and roles
// claims in access tokens (["team-<subject or client>"], ["role-<…>"]),
// and POST /test/config?alg=ES256&format=opaque, which sets the signing
// algorithm and format of the access tokens issued next.
// Prints "OIDC_READY <issuer>" on stdout once it listens.
import http from "node:http";
import { randomBytes, generateKeyPairSync } from "node:crypto";
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
let atAlg = process.env.OIDC_AT_ALG || "";
let atFormat = "jwt";

function freshKeys() {
  const kid = randomBytes(6).toString("hex");
  const jwk = (kp, extra) => ({ ...kp.privateKey.export({ format: "jwk" }), use: "sig", ...extra });
  return [
    jwk(generateKeyPairSync("rsa", { modulusLength: 2048 }), { kid: "rsa-" + kid }),
    jwk(generateKeyPairSync("ec", { namedCurve: "P-256" }), { kid: "ec-" + kid }),
    jwk(generateKeyPairSync("ed25519"), { kid: "ed-" + kid }),
  ];
}
const staticClient = (id) => ({
  client_id: id,
  client_secret: id + "-secret",
  grant_types: ["client_credentials"],
  response_types: [],
  redirect_uris: [],
  token_endpoint_auth_method: "client_secret_basic",
});

let provider;
const server = http.createServer(async (req, res) => {
  try {
    if (req.method === "POST" && req.url.startsWith("/test/config")) {
      const q = new URL(req.url, "http://x").searchParams;
      if (q.has("alg")) atAlg = q.get("alg");
      if (q.has("format")) atFormat = q.get("format");
      res.end("ok");
      return;
    }
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
    ...(process.env.OIDC_KEYS ? { jwks: { keys: freshKeys() } } : {}),
    clients: ["mcpvisor-gateway", "cc-user", "cc-admin"].map(staticClient),
    extraTokenClaims: async (_ctx, token) => {
      const who = token.accountId || token.clientId;
      return { groups: ["team-" + who], roles: ["role-" + who] };
    },
    // OIDC_REGISTER_SCOPES: clients may also register the resource's
    // scopes (the TypeScript SDK registers the scopes it will ask for).
    scopes: ["openid", "offline_access", ...(process.env.OIDC_REGISTER_SCOPES ? scopes : [])],
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      revocation: { enabled: true },
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
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
            accessTokenFormat: atFormat,
            ...(atAlg && atFormat === "jwt" ? { jwt: { sign: { alg: atAlg } } } : {}),
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

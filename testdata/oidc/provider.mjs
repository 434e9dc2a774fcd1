// A real OAuth 2.1 / OpenID Connect authorization server for mcpvisor's
// tests: node-oidc-provider on 127.0.0.1, headless (every authorization is
// granted at once to a fixed test account), with dynamic registration,
// PKCE required, resource indicators (JWT access tokens whose aud is the
// MCP server), rotating refresh tokens with reuse detection, revocation
// and RFC 9207 iss.
//
// Environment: OIDC_RESOURCE (the MCP server URL, required; or several
// space-separated resource URLs, each with the same scopes, the first being
// the default resource), OIDC_SCOPES
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
// algorithm and format of the access tokens issued next;
// POST /test/config?account=NAME names the account the auto-approving
// interaction logs in from then on (default "test-user").
//
// Token exchange (RFC 8693; node-oidc-provider has no handler built in,
// the one below is registered with provider.registerGrantType): the
// client mcpvisor-gateway presents an access token this provider issued
// (subject_token, subject_token_type access_token; JWT tokens are verified
// with the provider's own keys, opaque ones looked up), not expired, whose
// audience is one of the resources (OIDC_EXCHANGE_FROM, space-separated,
// narrows that list), and gets an access token for the resource it asks
// for (resource or audience: one of the resources) with the subject
// token's sub and claims, the scope it asks for within the subject
// token's, and an act claim naming itself. Refusals: invalid_grant (the
// subject token is unknown, expired, or for another audience),
// invalid_target, invalid_scope, invalid_request, unauthorized_client.
// Prints "OIDC_READY <issuer>" on stdout once it listens.
import http from "node:http";
import { randomBytes, generateKeyPairSync } from "node:crypto";
import { createRequire } from "node:module";

const require = createRequire(process.env.OIDC_MODULES + "/");
const { default: Provider, errors } = await import(require.resolve("oidc-provider"));

const jose = await import(require.resolve("jose"));

const words = (s) => (s || "").split(" ").filter(Boolean);
const resources = words(process.env.OIDC_RESOURCE);
if (resources.length === 0) {
  console.error("OIDC_RESOURCE is required");
  process.exit(2);
}
const resource = resources[0]; // the default resource
const scopes = words(process.env.OIDC_SCOPES || "mcp:tools");
const ttl = Number(process.env.OIDC_TTL || 60);
// The resources whose access tokens may be exchanged (subject tokens).
const exchangeFrom = words(process.env.OIDC_EXCHANGE_FROM).length ? words(process.env.OIDC_EXCHANGE_FROM) : resources;
let account = "test-user";
let atAlg = process.env.OIDC_AT_ALG || "";
let atFormat = "jwt";

const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";
const EXCHANGER = "mcpvisor-gateway";

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
  // Every static client lists the token exchange grant, so that the
  // handler can answer the others unauthorized_client (RFC 6749 §5.2):
  // only EXCHANGER may exchange.
  grant_types: ["client_credentials", TOKEN_EXCHANGE],
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
      if (q.has("account")) account = q.get("account") || "test-user";
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
      const claims = { groups: ["team-" + who], roles: ["role-" + who] };
      // RFC 8693 §4.1: an exchanged token names the client that acts.
      if (token.gty === "token-exchange") claims.act = { sub: token.clientId };
      return claims;
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
        getResourceServerInfo: async (_ctx, indicator) => resourceInfo(indicator),
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
  const keys = jose.createRemoteJWKSet(new URL(issuer + "/jwks"));
  provider.registerGrantType(
    TOKEN_EXCHANGE,
    (ctx) => tokenExchange(ctx, keys),
    ["subject_token", "subject_token_type", "requested_token_type", "actor_token", "actor_token_type", "audience", "scope", "resource"],
    ["resource", "audience"],
  );
  console.log(`OIDC_READY ${issuer}`);
});

// resourceInfo is the resource server configuration of indicator, one of
// the resources.
function resourceInfo(indicator) {
  if (!resources.includes(indicator)) throw new errors.InvalidTarget();
  return {
    scope: scopes.join(" "),
    audience: indicator,
    accessTokenTTL: ttl,
    accessTokenFormat: atFormat,
    ...(atAlg && atFormat === "jwt" ? { jwt: { sign: { alg: atAlg } } } : {}),
  };
}

const refuse = (code, description) => new errors.CustomOIDCProviderError(code, description);

// subjectOf verifies a subject token this provider issued and returns its
// subject, audiences and scopes. JWT access tokens are verified with the
// provider's own keys (its JWKS), opaque ones looked up.
async function subjectOf(value, keys, issuer) {
  if (value.split(".").length === 3) {
    let payload;
    try {
      ({ payload } = await jose.jwtVerify(value, keys, { issuer, typ: "at+jwt" }));
    } catch (err) {
      throw refuse("invalid_grant", err?.code === "ERR_JWT_EXPIRED" ? "the subject token has expired" : "the subject token is not valid");
    }
    return { sub: payload.sub, aud: [payload.aud].flat(), scope: words(payload.scope) };
  }
  const t = (await provider.AccessToken.find(value)) || (await provider.ClientCredentials.find(value));
  if (!t || t.isExpired) throw refuse("invalid_grant", "the subject token is unknown or has expired");
  return { sub: t.accountId || t.clientId, aud: [t.aud].flat(), scope: words(t.scope) };
}

// tokenExchange is the token endpoint's RFC 8693 grant. The client is
// authenticated (and allowed the grant type) by the time it runs.
async function tokenExchange(ctx, keys) {
  const p = ctx.oidc.params;
  const client = ctx.oidc.client;
  if (client.clientId !== EXCHANGER) throw refuse("unauthorized_client", "this client may not exchange tokens");
  if (!p.subject_token) throw refuse("invalid_request", "subject_token is required");
  if (p.subject_token_type !== ACCESS_TOKEN_TYPE) throw refuse("invalid_request", "unsupported subject_token_type");
  if (p.requested_token_type && p.requested_token_type !== ACCESS_TOKEN_TYPE) {
    throw refuse("invalid_request", "unsupported requested_token_type");
  }
  if (p.actor_token || p.actor_token_type) throw refuse("invalid_request", "delegation (actor_token) is not supported");
  const targets = [...new Set([p.resource, p.audience].flat().filter(Boolean))];
  if (targets.length !== 1) throw refuse("invalid_target", "name exactly one target resource (resource or audience)");
  const target = targets[0];
  if (!resources.includes(target)) throw refuse("invalid_target", "unknown resource");
  const subject = await subjectOf(p.subject_token, keys, ctx.oidc.provider.issuer);
  if (!subject.sub || !subject.aud.some((a) => exchangeFrom.includes(a))) {
    throw refuse("invalid_grant", "the subject token is for another audience");
  }
  const info = resourceInfo(target);
  const wanted = p.scope ? words(p.scope) : subject.scope;
  const granted = wanted.filter((s) => scopes.includes(s));
  if (p.scope && (granted.length !== wanted.length || !wanted.every((s) => subject.scope.includes(s)))) {
    throw refuse("invalid_scope", "the scope exceeds the subject token's");
  }
  const token = new provider.AccessToken({
    accountId: subject.sub,
    client,
    gty: "token-exchange",
    scope: granted.join(" ") || undefined,
  });
  token.resourceServer = new provider.ResourceServer(target, info);
  ctx.oidc.entity("AccessToken", token);
  const value = await token.save();
  ctx.body = {
    access_token: value,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: token.tokenType,
    expires_in: token.expiration,
    ...(token.scope ? { scope: token.scope } : {}),
  };
}

process.on("SIGTERM", () => server.close(() => process.exit(0)));

// The official TypeScript SDK's client, with its OAuth client provider,
// against `mcpvisor supervise --auth-issuer <issuer>` (the gateway as an
// OAuth resource server): the first connect meets 401, the SDK discovers
// the protected resource metadata and the authorization server, registers
// dynamically and sends the user to authorize (with PKCE and the resource
// indicator); this script plays the user's browser (the test authorization
// server approves at once), hands the code to finishAuth, connects again
// with the token and lists and calls tools.
//
// Usage: node oauth.mjs <mcp-url>
// Exits 0 when every check passed; prints one line per check on stdout.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [url] = process.argv.slice(2);
const deadline = setTimeout(() => { console.log("FAIL: timed out"); process.exit(1); }, 60000);

function check(ok, what) {
  console.log(`${ok ? "ok" : "FAIL"}: ${what}`);
  if (!ok) process.exit(1);
}

const redirectUrl = "http://127.0.0.1:1/callback";
let authorizationCode;

// browse follows an authorization URL as a browser would (keeping
// cookies), until the authorization server redirects to redirectUrl; it
// returns the code of that redirect.
async function browse(start) {
  const jar = new Map();
  let next = start.toString();
  for (let hop = 0; hop < 10; hop++) {
    const res = await fetch(next, {
      redirect: "manual",
      headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") },
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const i = pair.indexOf("=");
      jar.set(pair.slice(0, i), pair.slice(i + 1));
    }
    const loc = res.headers.get("location");
    if (!loc) throw new Error(`authorization stopped at ${res.status}: ${await res.text()}`);
    const abs = new URL(loc, next);
    if (abs.href.startsWith(redirectUrl)) {
      const code = abs.searchParams.get("code");
      if (!code) throw new Error(`no code: ${abs.search}`);
      return code;
    }
    next = abs.href;
  }
  throw new Error("too many redirects");
}

let clientInfo, tokens, verifier;
let sawResource = false;
const provider = {
  get redirectUrl() { return redirectUrl; },
  get clientMetadata() {
    return {
      client_name: "ts-sdk-oauth-proof",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  clientInformation() { return clientInfo; },
  saveClientInformation(info) { clientInfo = info; },
  tokens() { return tokens; },
  saveTokens(t) { tokens = t; },
  saveCodeVerifier(v) { verifier = v; },
  codeVerifier() { return verifier; },
  async redirectToAuthorization(authUrl) {
    sawResource = authUrl.searchParams.get("resource") === url;
    authorizationCode = await browse(authUrl);
  },
};

const client = new Client({ name: "ts-sdk-oauth-proof", version: "1.0.0" });
let transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
try {
  await client.connect(transport);
  check(false, "the first connect, without a token, should need authorization");
} catch (err) {
  check(err instanceof UnauthorizedError, `401 led to authorization: ${err}`);
}
check(sawResource, "the authorization request named the gateway as resource");
check(!!authorizationCode, "the authorization server returned a code");
await transport.finishAuth(authorizationCode);
check(!!tokens?.access_token, `token: scope ${tokens?.scope}`);

transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
await client.connect(transport);
check(client.getServerVersion()?.name === "mcpvisor", `connected with the token, server ${JSON.stringify(client.getServerVersion())}`);
let names = [];
for (let i = 0; i < 200; i++) {
  names = (await client.listTools()).tools.map((t) => t.name);
  if (names.includes("a__echo")) break;
  await new Promise((r) => setTimeout(r, 50));
}
check(names.includes("a__echo"), `tools/list: ${names.join(" ")}`);
const res = await client.callTool({ name: "a__echo", arguments: { text: "through OAuth" } });
check(JSON.stringify(res.content).includes("through OAuth"), `tools/call a__echo: ${JSON.stringify(res.content)}`);
await client.close();
clearTimeout(deadline);

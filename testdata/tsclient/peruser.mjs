// The official TypeScript SDK's client calls a tool of an upstream server
// whose credentials are per user, through the gateway, with its access
// token: the first time the gateway asks it to open a URL (MCP 2025-11-25
// URL elicitation, error -32042), which the SDK turns into its
// UrlElicitationRequiredError; once the user authorized, the call goes
// through.
//
// Usage: node peruser.mjs <mcp-url> <access token> <tool> <text>
// Prints "ELICIT <mode> <elicitationId> <url>" when asked to open a URL,
// "RESULT <text>" when the call succeeded; exits 0 in both cases.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UrlElicitationRequiredError } from "@modelcontextprotocol/sdk/types.js";

const [url, token, tool, text] = process.argv.slice(2);
const deadline = setTimeout(() => { console.log("FAIL: timed out"); process.exit(1); }, 60000);
const fail = (msg) => { console.log(`FAIL: ${msg}`); process.exit(1); };

const client = new Client({ name: "ts-sdk-peruser", version: "1.0.0" }, { capabilities: { elicitation: { url: {} } } });
await client.connect(new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
}));
try {
  const res = await client.callTool({ name: tool, arguments: { text } });
  if (res.isError) fail(`tool error: ${JSON.stringify(res.content)}`);
  console.log(`RESULT ${res.content?.[0]?.text ?? ""}`);
} catch (err) {
  if (!(err instanceof UrlElicitationRequiredError)) fail(`${err?.constructor?.name}: ${err?.message}`);
  for (const e of err.elicitations) console.log(`ELICIT ${e.mode} ${e.elicitationId} ${e.url}`);
}
await client.close();
clearTimeout(deadline);
process.exit(0);

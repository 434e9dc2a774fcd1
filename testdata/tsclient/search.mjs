// The official TypeScript SDK's client uses the gateway in search mode,
// as a model would: it lists the tools (the search tools, not the pool),
// searches for what it wants, and calls the tool it found through
// call_tool, a tool it never listed.
//
// Usage: node search.mjs <mcp-url> <query> <expected tool> <arguments JSON>
// Prints "LISTED <names>", "FOUND <names>", "RESULT <text>"; exits 0
// when the expected tool was found and its call succeeded.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, query, expected, args] = process.argv.slice(2);
const deadline = setTimeout(() => { console.log("FAIL: timed out"); process.exit(1); }, 60000);
const fail = (msg) => { console.log(`FAIL: ${msg}`); process.exit(1); };

const client = new Client({ name: "ts-sdk-search", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const { tools } = await client.listTools();
const listed = tools.map((t) => t.name);
console.log(`LISTED ${listed.join(" ")}`);
if (!listed.includes("search_tools")) fail("search_tools is not listed");
if (listed.includes(expected)) fail(`${expected} is listed: not search mode`);

const found = await client.callTool({ name: "search_tools", arguments: { query } });
if (found.isError) fail(`search_tools: ${JSON.stringify(found.content)}`);
const hits = JSON.parse(found.content[0].text);
console.log(`FOUND ${hits.map((h) => h.name).join(" ")}`);
const hit = hits.find((h) => h.name === expected);
if (!hit) fail(`${expected} was not found`);

const res = await client.callTool({ name: "call_tool", arguments: { name: hit.name, arguments: JSON.parse(args) } });
if (res.isError) fail(`call_tool: ${JSON.stringify(res.content)}`);
console.log(`RESULT ${res.content?.[0]?.text ?? ""}`);
await client.close();
clearTimeout(deadline);
process.exit(0);

// The official TypeScript SDK's client against examples/gatewayhost: a
// host serving its pool (one mock server, "calc") plus a tool of its own
// ("greet") through the embedded gateway. It lists the tools, expects
// both the pool's and the host's, and calls one of each.
//
// Usage: node gatewayhost.mjs <mcp-url>
// Exits 0 when every check passed; prints one line per check on stdout.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const deadline = setTimeout(() => { console.log("FAIL: timed out"); process.exit(1); }, 60000);

function check(ok, what) {
  console.log(`${ok ? "ok" : "FAIL"}: ${what}`);
  if (!ok) process.exit(1);
}

const client = new Client({ name: "ts-sdk-gatewayhost", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(process.argv[2])));
check(client.getServerVersion()?.name === "mcpvisor", `connected, server ${JSON.stringify(client.getServerVersion())}`);

const tools = (await client.listTools()).tools;
const names = tools.map((t) => t.name);
check(names.includes("greet"), `tools/list has the host's tool greet: ${JSON.stringify(names)}`);
check(names.includes("calc__add"), "tools/list has the pool's tool calc__add");
const greetDef = tools.find((t) => t.name === "greet");
check(greetDef.inputSchema?.required?.[0] === "name", `greet's definition as the host gave it: ${JSON.stringify(greetDef.inputSchema)}`);

const sum = await client.callTool({ name: "calc__add", arguments: { a: 20, b: 22 } });
check(sum.content?.[0]?.text === "42" && !sum.isError, `tools/call calc__add: ${JSON.stringify(sum.content)}`);

const hello = await client.callTool({ name: "greet", arguments: { name: "Ada" } });
check(hello.content?.[0]?.text === "Hello, Ada, from the host." && !hello.isError, `tools/call greet: ${JSON.stringify(hello.content)}`);

const bad = await client.callTool({ name: "greet", arguments: {} });
check(bad.isError === true, `tools/call greet without a name is a tool error: ${JSON.stringify(bad.content)}`);

await client.close();
clearTimeout(deadline);
process.exit(0);

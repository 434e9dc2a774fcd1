// The official TypeScript SDK's client against `mcpvisor supervise` (the
// gateway): list and call the tools of servers behind it, over Streamable
// HTTP or stdio, and see a tool added behind it as tools/list_changed.
//
// Usage: node client.mjs http <mcp-url>
//        node client.mjs stdio <mcpvisor-binary> <config-file>
// Exits 0 when every check passed; prints one line per check on stdout.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, ...args] = process.argv.slice(2);
const deadline = setTimeout(() => { console.log("FAIL: timed out"); process.exit(1); }, 60000);

function check(ok, what) {
  console.log(`${ok ? "ok" : "FAIL"}: ${what}`);
  if (!ok) process.exit(1);
}

const transport = mode === "http"
  ? new StreamableHTTPClientTransport(new URL(args[0]))
  : new StdioClientTransport({ command: args[0], args: ["supervise", "--stdio", "--config", args[1]], stderr: "ignore" });
const client = new Client({ name: "ts-sdk-proof", version: "1.0.0" });
let changed = 0;
client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; });
await client.connect(transport);
check(client.getServerVersion()?.name === "mcpvisor", `connected over ${mode}, server ${JSON.stringify(client.getServerVersion())}`);

let names = [];
for (let i = 0; i < 200; i++) {
  names = (await client.listTools()).tools.map((t) => t.name);
  if (names.includes("a__echo") && names.includes("b__add")) break;
  await new Promise((r) => setTimeout(r, 50));
}
check(names.includes("a__echo") && names.includes("b__add"), `tools/list: ${names.length} tools`);

const res = await client.callTool({ name: "b__add", arguments: { a: 20, b: 22 } });
check(res.content?.[0]?.text === "42", `tools/call b__add: ${JSON.stringify(res.content)}`);

const late = `late_ts_${mode}`;
// A list_changed says only that something changed: one sent for the servers
// that were still connecting may arrive after the call below. Each one is
// answered by listing again, until the added tool is listed or 10 s pass.
changed = 0;
await client.callTool({ name: "a__announce", arguments: { text: late } });
let seen = 0;
let listed = false;
for (let i = 0; i < 200 && !listed; i++) {
  if (changed > seen) {
    seen = changed;
    names = (await client.listTools()).tools.map((t) => t.name);
    listed = names.includes(`a__${late}`);
  } else {
    await new Promise((r) => setTimeout(r, 50));
  }
}
check(changed > 0, "tools/list_changed received");
check(listed, `the added tool a__${late} is listed after a list_changed`);

await client.close();
clearTimeout(deadline);
process.exit(0);

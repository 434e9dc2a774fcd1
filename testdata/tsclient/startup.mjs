// What an agent host does at start, with the official TypeScript SDK's
// client against `mcpvisor supervise` while its servers are still
// starting: connect (over stdio it starts the gateway itself; over HTTP it
// connects the moment the port answers), list the tools ONCE, and call a
// tool of every server. No retry, no sleep: what the first list lacks, the
// host never offers its model.
//
// Usage: node startup.mjs http <mcp-url> <t0-epoch-ms> <server,server,...>
//        node startup.mjs stdio <mcpvisor-binary> <config-file> <state-dir> <server,server,...>
// Prints one line per check, and "first-list-ms N": the time from t0 (over
// stdio: from starting the gateway) to the answer of the first tools/list.
// Exits 0 when every check passed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [mode, ...args] = process.argv.slice(2);
const deadline = setTimeout(() => { console.log("FAIL: timed out"); process.exit(1); }, 90000);

function check(ok, what) {
  console.log(`${ok ? "ok" : "FAIL"}: ${what}`);
  if (!ok) process.exit(1);
}

let client, t0, servers;
if (mode === "http") {
  t0 = Number(args[1]);
  servers = args[2].split(",");
  // Connect the moment the port answers: a refused connection is retried
  // at once (a host started beside the gateway does the same, or fails).
  for (let i = 0; ; i++) {
    client = new Client({ name: "ts-sdk-startup", version: "1.0.0" });
    try {
      await client.connect(new StreamableHTTPClientTransport(new URL(args[0])));
      break;
    } catch (e) {
      if (i >= 2000) throw e;
      await new Promise((r) => setTimeout(r, 5));
    }
  }
} else {
  t0 = Date.now();
  servers = args[3].split(",");
  client = new Client({ name: "ts-sdk-startup", version: "1.0.0" });
  await client.connect(new StdioClientTransport({
    command: args[0],
    args: ["supervise", "--stdio", "--config", args[1], "--state-dir", args[2]],
    env: { ...process.env },
    stderr: "ignore",
  }));
}
check(client.getServerVersion()?.name === "mcpvisor", `connected over ${mode} after ${Date.now() - t0} ms`);

const names = (await client.listTools()).tools.map((t) => t.name);
console.log(`first-list-ms ${Date.now() - t0}`);
// The gateway's names are <server>__<tool> (a host adds its own prefix).
for (const s of servers) {
  check(names.includes(`${s}__echo`), `the first tools/list (${names.length} tools) has ${s}__echo`);
}
for (const s of servers) {
  const res = await client.callTool({ name: `${s}__echo`, arguments: { text: `hello ${s}` } });
  check(res.content?.[0]?.text === `hello ${s}`, `tools/call ${s}__echo: ${JSON.stringify(res.content)}`);
}

await client.close();
clearTimeout(deadline);
process.exit(0);

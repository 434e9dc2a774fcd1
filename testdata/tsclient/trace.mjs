// The official TypeScript SDK's client calls tools through the gateway
// with a W3C trace context in each request's _meta (SEP-414), as a
// traced agent host does: the trace must go on through the gateway into
// the servers behind it.
//
// Usage: node trace.mjs <mcp-url> <traceparent> <tool>...
// Calls each tool with {"message": "hi"} arguments and prints its first
// text content as one line "RESULT <tool> <text>". Exits 0 when every
// call succeeded.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, traceparent, ...tools] = process.argv.slice(2);
const deadline = setTimeout(() => { console.log("FAIL: timed out"); process.exit(1); }, 60000);

const client = new Client({ name: "ts-sdk-traced", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
for (const name of tools) {
  const res = await client.callTool({
    name,
    arguments: { message: "hi" },
    _meta: { traceparent, tracestate: "ts=1", baggage: "tenant=acme" },
  });
  if (res.isError) {
    console.log(`FAIL: ${name}: ${JSON.stringify(res.content)}`);
    process.exit(1);
  }
  console.log(`RESULT ${name} ${res.content?.[0]?.text ?? ""}`);
}
await client.close();
clearTimeout(deadline);
process.exit(0);

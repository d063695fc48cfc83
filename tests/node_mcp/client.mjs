// The MCP TypeScript SDK's client against `harnessc gateway` (driven by tests/test_gateway_node.py).
//
//   node client.mjs stdio PYTHON ARGS_JSON       starts the gateway: PYTHON with ARGS_JSON's args
//   node client.mjs http URL TOKEN
//
// It lists the tools, then runs the calls of the JSON array on standard input in order, each
// `{"name": …, "arguments": {…}}`, and prints one JSON object: the tool names listed and, per
// call, the result (isError, structuredContent, the text) and the progress notifications seen.
// An entry `{"wait": "tools/list_changed"}` waits (up to 20 s) for that notification, then
// lists the tools again (`relisted`); `listChanged` counts the notifications.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

function transportOf(argv) {
  const [mode, first, second] = argv;
  if (mode === "stdio") {
    return new StdioClientTransport({ command: first, args: JSON.parse(second), stderr: "inherit" });
  }
  if (mode === "http") {
    return new StreamableHTTPClientTransport(new URL(first), {
      requestInit: { headers: { Authorization: `Bearer ${second}` } },
    });
  }
  throw new Error(`usage: node client.mjs stdio PYTHON ARGS_JSON | http URL TOKEN (not ${mode})`);
}

async function main() {
  const calls = await readStdin();
  const client = new Client({ name: "harnessc-node-test", version: "0.0.0" });
  const out = { tools: [], calls: [], listChanged: 0, relisted: null };
  let changed = () => {};
  client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
    out.listChanged += 1;
    changed();
  });
  await client.connect(transportOf(process.argv.slice(2)));
  try {
    out.tools = (await client.listTools()).tools.map((t) => t.name);
    for (const call of calls) {
      if (call.wait === "tools/list_changed") {
        if (out.listChanged === 0) {
          await new Promise((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error("no tools/list_changed in 20 s")), 20000);
            changed = () => {
              clearTimeout(timer);
              resolve();
            };
          });
        }
        out.relisted = (await client.listTools()).tools.map((t) => t.name);
        continue;
      }
      const progress = [];
      const result = await client.callTool({ name: call.name, arguments: call.arguments }, undefined, {
        onprogress: (p) => progress.push({ progress: p.progress, total: p.total, message: p.message }),
        timeout: 120000,
      });
      out.calls.push({
        isError: result.isError === true,
        structuredContent: result.structuredContent ?? null,
        text: (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n"),
        progress,
      });
    }
  } finally {
    await client.close();
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((error) => {
  process.stderr.write(`${error.stack || error}\n`);
  process.exit(1);
});

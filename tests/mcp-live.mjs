#!/usr/bin/env node
// mcp-live.mjs: the official TypeScript MCP SDK's client (v1), kept
// connected to `appliance run` over Streamable HTTP while a test drives it
// one line at a time, so what the appliance does meanwhile (a reload) is
// seen as a client sees it.
//
//   node tests/mcp-live.mjs --url URL --token TOKEN
//
// Reads JSON lines on stdin:
//   {"op": "list"}                       every tool, and run_python's description
//   {"op": "call", "id": ID, "name": N, "arguments": A}   answered when done
//   {"op": "terminate"}                  ends the MCP session (DELETE), then answers
//   {"op": "close"}
// and writes JSON lines on stdout: {"op": "ready"} once connected, one
// answer per request ({"op", "id"?, "result" | "error"}), and
// {"op": "list_changed"} for each notifications/tools/list_changed.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

function out(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

const argv = process.argv.slice(2);
const opt = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : null;
};
const url = opt("--url"), token = opt("--token");
if (!url || !token) {
  process.stderr.write("usage: node mcp-live.mjs --url URL --token TOKEN\n");
  process.exit(2);
}

const client = new Client({ name: "mcp-live", version: "0" });
client.setNotificationHandler(ToolListChangedNotificationSchema, () => out({ op: "list_changed" }));
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});

async function list() {
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  const run = tools.find((t) => t.name === "run_python");
  return { tools: tools.map((t) => t.name), description: run ? run.description : null };
}

async function handle(req) {
  try {
    if (req.op === "list") out({ op: "list", result: await list() });
    else if (req.op === "call")
      out({ op: "call", id: req.id,
            result: await client.callTool({ name: req.name, arguments: req.arguments }, undefined,
                                          { timeout: 600000 }) });
    else if (req.op === "terminate") {
      await transport.terminateSession();
      out({ op: "terminate", result: {} });
    } else if (req.op === "close") {
      await client.close();
      process.exit(0);
    } else out({ op: req.op, id: req.id, error: "unknown op" });
  } catch (e) {
    out({ op: req.op, id: req.id, error: String(e && e.message ? e.message : e) });
  }
}

try {
  await client.connect(transport);
  // The GET stream carries list_changed; the SDK opens it after initialized.
  out({ op: "ready" });
} catch (e) {
  out({ op: "fatal", error: String(e && e.message ? e.message : e) });
  process.exit(1);
}
const rl = createInterface({ input: process.stdin });
rl.on("line", (line) => {
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    out({ op: "bad", error: e.message });
    return;
  }
  handle(req);
});
rl.on("close", () => client.close().then(() => process.exit(0)));

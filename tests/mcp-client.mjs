#!/usr/bin/env node
// mcp-client.mjs: the official TypeScript MCP SDK's client, driving a stdio
// server we name on the command line: a peer nobody here wrote, for the
// integration tests (test_npm_peers.py against build/toy-server now,
// `appliance run` later).
//
//   node tests/mcp-client.mjs [--call JSON]... [--timeout MS] [--pause MS] -- COMMAND [ARG...]
//   node tests/mcp-client.mjs [--call JSON]... [--timeout MS] [--pause MS] --url URL [--token TOKEN]
//
// --url speaks Streamable HTTP to URL (with `Authorization: Bearer TOKEN`)
// instead of starting a command.
// It connects (initialize, notifications/initialized), lists every tool
// (following nextCursor), makes each --call in order (JSON: {"name": ...,
// "arguments": {...}}; --pause: that long between two calls; an argument
// "$session" is the session handle the last call's result gave), and prints
// one JSON document on stdout:
//   {"server": serverInfo, "tools": [{"name", "readOnlyHint", "description"}...],
//    "calls": [{"result": CallToolResult} or {"error": {"code", "message"}}...]}
// Each call also carries "ms": how long its tools/call took, request to answer.
// Exit status 0 when it got that far (a tool error is a result, a JSON-RPC
// error is recorded), 1 with {"fatal": message} when the connection or the
// listing failed, 2 on bad usage. The server's stderr passes through to ours.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const PAGES_MAX = 64;

function usage(msg) {
  process.stderr.write(`mcp-client: ${msg}\n` +
    "usage: node mcp-client.mjs [--call JSON]... [--timeout MS] [--pause MS] -- COMMAND [ARG...]\n");
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { calls: [], timeout: 30000, pause: 0, command: null, args: [], url: null,
                 token: null };
  let i = 0;
  for (; i < argv.length && argv[i] !== "--"; i++) {
    if (argv[i] === "--call" && i + 1 < argv.length) {
      let call;
      try {
        call = JSON.parse(argv[++i]);
      } catch (e) {
        usage(`--call: ${e.message}`);
      }
      if (typeof call !== "object" || call === null || typeof call.name !== "string")
        usage("--call needs an object with a string name");
      opts.calls.push(call);
    } else if (argv[i] === "--url" && i + 1 < argv.length) {
      opts.url = argv[++i];
    } else if (argv[i] === "--token" && i + 1 < argv.length) {
      opts.token = argv[++i];
    } else if (argv[i] === "--timeout" && i + 1 < argv.length) {
      opts.timeout = Number(argv[++i]);
      if (!Number.isInteger(opts.timeout) || opts.timeout <= 0) usage("--timeout: a positive integer");
    } else if (argv[i] === "--pause" && i + 1 < argv.length) {
      opts.pause = Number(argv[++i]);
      if (!Number.isInteger(opts.pause) || opts.pause < 0) usage("--pause: a whole number of ms");
    } else {
      usage(`unknown option ${argv[i]}`);
    }
  }
  if (opts.url) return opts;
  if (i + 1 >= argv.length) usage("no command after --");
  opts.command = argv[i + 1];
  opts.args = argv.slice(i + 2);
  return opts;
}

async function listAll(client, timeout) {
  const tools = [];
  let cursor;
  for (let page = 0; page < PAGES_MAX; page++) {
    const r = await client.listTools(cursor ? { cursor } : {}, { timeout });
    tools.push(...r.tools);
    cursor = r.nextCursor;
    if (!cursor) return tools;
  }
  throw new Error(`tools/list: more than ${PAGES_MAX} pages`);
}

async function callOne(client, call, timeout) {
  const start = performance.now();
  const ms = () => Math.round((performance.now() - start) * 10) / 10;
  try {
    const result = await client.callTool(
      { name: call.name, arguments: call.arguments ?? {} }, undefined, { timeout });
    return { result, ms: ms() };
  } catch (e) {
    return { error: { code: e.code ?? null, message: String(e.message ?? e) }, ms: ms() };
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  // The child gets the SDK's default environment (a short safe list), never
  // all of ours.
  const headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : {};
  const transport = opts.url
    ? new StreamableHTTPClientTransport(new URL(opts.url), { requestInit: { headers } })
    : new StdioClientTransport({ command: opts.command, args: opts.args, stderr: "inherit" });
  const client = new Client({ name: "appliance-tests-mcp-client", version: "1.0.0" });
  const out = { server: null, tools: [], calls: [] };
  try {
    await client.connect(transport, { timeout: opts.timeout });
    out.server = client.getServerVersion() ?? null;
    const tools = await listAll(client, opts.timeout);
    out.tools = tools.map((t) => ({ name: t.name,
                                    readOnlyHint: t.annotations?.readOnlyHint ?? null,
                                    description: t.description ?? null }));
    let session = null;
    for (const [k, call] of opts.calls.entries()) {
      if (k > 0 && opts.pause > 0) await new Promise((done) => setTimeout(done, opts.pause));
      const args = Object.fromEntries(Object.entries(call.arguments ?? {}).map(
        ([key, v]) => [key, v === "$session" ? session : v]));
      const done = await callOne(client, { ...call, arguments: args }, opts.timeout);
      session = done.result?.structuredContent?.session ?? session;
      out.calls.push(done);
    }
  } catch (e) {
    process.stdout.write(JSON.stringify({ fatal: String(e.message ?? e), ...out }) + "\n");
    await client.close().catch(() => {});
    process.exit(1);
  }
  process.stdout.write(JSON.stringify(out) + "\n");
  await client.close();
}

main();

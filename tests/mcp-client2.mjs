#!/usr/bin/env node
// mcp-client2.mjs: the v2 TypeScript MCP SDK's client (@modelcontextprotocol/
// client, which speaks 2026-07-28 beside the legacy revisions) driving a stdio
// server named on the command line, for the integration tests.
//
//   node tests/mcp-client2.mjs [--negotiation legacy|auto|2026-07-28] [--in-place]
//       [--call JSON]... [--timeout MS] [--reset-on-progress] [--abort-after MS]
//       [--list-changed] [--elicit ANSWER[,ANSWER...]] -- COMMAND [ARG...]
//   node tests/mcp-client2.mjs [options] --url URL [--token TOKEN]
//
// --negotiation picks the SDK's versionNegotiation: legacy (initialize, the
// SDK's default), auto (a server/discover probe, falling back to initialize)
// or a pinned modern revision. The SDK's own StdioClientTransport probes on a
// second, throwaway copy of the server; --in-place uses a subclass, which the
// SDK probes on the one connection. Each --call ({"name", "arguments"}) runs
// after tools/list with the request timeout --timeout; --reset-on-progress
// restarts that timeout on each progress notification; --abort-after aborts
// each call after MS. --elicit declares form elicitation and answers each
// elicitation/create (legacy: a request; 2026-07-28: inside an
// InputRequiredResult, which the SDK fulfils and retries itself) with the
// next answer of the list (the last repeats): accept (approve true), false
// (accept, approve false), decline or cancel. --url speaks Streamable HTTP
// to URL instead of starting a command, with `Authorization: Bearer TOKEN`.
// It prints one JSON document:
//   {"era", "version", "server", "discover", "instructions", "tools": [Tool...],
//    "calls": [{"result"} or {"error": {"code", "message"}}, "progress": [...]],
//    "events": [...], "elicitations": [{"message", "mode", "answer"}...]}
// Exit 0 when it got that far, 1 with {"fatal": message} when connecting or
// listing failed, 2 on bad usage.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

function usage(msg) {
  process.stderr.write(`mcp-client2: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { negotiation: "legacy", inPlace: false, calls: [], timeout: 60000,
                 reset: false, abortAfter: 0, listChanged: false, elicit: null, command: null,
                 args: [], url: null, token: null };
  let i = 0;
  const num = (s) => {
    const n = Number(s);
    if (!Number.isInteger(n) || n <= 0) usage(`not a positive integer: ${s}`);
    return n;
  };
  for (; i < argv.length && argv[i] !== "--"; i++) {
    const a = argv[i];
    if (a === "--negotiation" && i + 1 < argv.length) opts.negotiation = argv[++i];
    else if (a === "--in-place") opts.inPlace = true;
    else if (a === "--call" && i + 1 < argv.length) {
      let call;
      try {
        call = JSON.parse(argv[++i]);
      } catch (e) {
        usage(`--call: ${e.message}`);
      }
      opts.calls.push(call);
    } else if (a === "--timeout" && i + 1 < argv.length) opts.timeout = num(argv[++i]);
    else if (a === "--reset-on-progress") opts.reset = true;
    else if (a === "--abort-after" && i + 1 < argv.length) opts.abortAfter = num(argv[++i]);
    else if (a === "--list-changed") opts.listChanged = true;
    else if (a === "--url" && i + 1 < argv.length) opts.url = argv[++i];
    else if (a === "--token" && i + 1 < argv.length) opts.token = argv[++i];
    else if (a === "--elicit" && i + 1 < argv.length) {
      opts.elicit = argv[++i].split(",");
      for (const e of opts.elicit)
        if (!["accept", "false", "decline", "cancel"].includes(e)) usage(`--elicit: ${e}?`);
    }
    else usage(`unknown option ${a}`);
  }
  if (opts.url) return opts;
  if (i + 1 >= argv.length) usage("no command after --");
  opts.command = argv[i + 1];
  opts.args = argv.slice(i + 2);
  return opts;
}

// A subclass: the SDK negotiates on this one connection instead of a sibling.
class InPlaceTransport extends StdioClientTransport {}

function negotiation(name) {
  if (name === "legacy") return { mode: "legacy" };
  if (name === "auto") return { mode: "auto" };
  return { mode: { pin: name } };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const events = [];
  const clientOpts = { capabilities: {}, versionNegotiation: negotiation(opts.negotiation) };
  if (opts.listChanged)
    clientOpts.listChanged = {
      tools: { onChanged: (err, tools) => events.push({ listChanged: err ? String(err) : tools.length }) },
    };
  const elicitations = [];
  if (opts.elicit) clientOpts.capabilities.elicitation = { form: {} };
  const client = new Client({ name: "mcp-client2", version: "0.0.0" }, clientOpts);
  if (opts.elicit)
    client.setRequestHandler("elicitation/create", async (request) => {
      const p = request.params ?? {};
      const answer = opts.elicit[Math.min(elicitations.length, opts.elicit.length - 1)];
      elicitations.push({ message: p.message, mode: p.mode ?? null, answer });
      if (answer === "accept") return { action: "accept", content: { approve: true } };
      if (answer === "false") return { action: "accept", content: { approve: false } };
      return { action: answer };
    });
  client.onerror = (e) => events.push({ onerror: String(e?.message ?? e) });
  const Transport = opts.inPlace ? InPlaceTransport : StdioClientTransport;
  const headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : {};
  const transport = opts.url
    ? new StreamableHTTPClientTransport(new URL(opts.url), { requestInit: { headers } })
    : new Transport({ command: opts.command, args: opts.args, stderr: "inherit" });
  const out = { calls: [], events, elicitations };
  try {
    await client.connect(transport, { timeout: opts.timeout });
    out.era = client.getProtocolEra();
    out.version = client.getNegotiatedProtocolVersion();
    out.server = client.getServerVersion() ?? null;
    out.discover = client.getDiscoverResult?.() ?? null;
    out.instructions = client.getInstructions() ?? null;
    out.tools = (await client.listTools({}, { timeout: opts.timeout })).tools;
  } catch (e) {
    process.stdout.write(JSON.stringify({ fatal: String(e?.message ?? e), events }) + "\n");
    await client.close().catch(() => {});
    process.exit(1);
  }
  for (const call of opts.calls) {
    const progress = [];
    const reqOpts = { timeout: opts.timeout, resetTimeoutOnProgress: opts.reset,
                      onprogress: (p) => progress.push(p) };
    let timer;
    if (opts.abortAfter) {
      const ac = new AbortController();
      reqOpts.signal = ac.signal;
      timer = setTimeout(() => ac.abort("aborted by the test"), opts.abortAfter);
    }
    const started = Date.now();
    try {
      const result = await client.callTool({ name: call.name, arguments: call.arguments ?? {} },
                                           reqOpts);
      out.calls.push({ result, progress, ms: Date.now() - started });
    } catch (e) {
      out.calls.push({ error: { code: e.code ?? null, message: String(e.message ?? e) },
                       progress, ms: Date.now() - started });
    }
    clearTimeout(timer);
  }
  await client.close();
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ fatal: String(e?.stack ?? e) }) + "\n");
  process.exit(1);
});

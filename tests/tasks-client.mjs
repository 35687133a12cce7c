#!/usr/bin/env node
// tasks-client.mjs: MCP tasks from the client's side, for the integration
// tests (test_tasks.py): a run_python cell run as a task, polled to its end,
// or cancelled mid-run, or another client's task probed. Two clients:
//
//   --sdk v1  the v1 TypeScript SDK (@modelcontextprotocol/sdk 1.x), in the
//             2025-11-25 era: initialize, then its experimental task runtime
//             (client.experimental.tasks: callToolStream, which makes the
//             task and polls tasks/get at the task's pollInterval, then
//             tasks/result; getTask, getTaskResult, listTasks, cancelTask).
//   --sdk v2  the v2 SDK (@modelcontextprotocol/client 2.x), in the
//             2026-07-28 era, with the tasks extension declared. The v2 SDK
//             has no task runtime: its 2026-07-28 codec refuses a tools/call
//             answered with resultType "task" ("Unsupported result type"). So
//             only the SDK's transports are used (StreamableHTTPClientTransport,
//             or its stdio one), to send raw JSON-RPC requests (transport.send,
//             answers from transport.onmessage), each with the per-request _meta
//             (protocol version, client capabilities with the extension); the
//             task is polled with tasks/get at its pollIntervalMs, its
//             questions answered with tasks/update.
//
//   node tests/tasks-client.mjs --sdk v1|v2 [--action run|cancel|probe] [--code SRC]
//       [--ttl MS] [--marker TEXT] [--elicit accept|false|decline|cancel] [--task-id ID]
//       [--timeout MS] [--hold] -- COMMAND [ARG...]
//   node tests/tasks-client.mjs [options] --url URL [--token TOKEN]
//
// A command is started as a stdio server (its stderr passes through to
// ours); --url speaks Streamable HTTP to URL with `Authorization: Bearer
// TOKEN`. The actions:
//   run     run --code as a task (v1: --ttl asks for that ttl) and poll it
//           to its end, keeping every status seen; then its result (v1:
//           tasks/result; v2: the completed task's result).
//   cancel  the same, but once a tasks/get's statusMessage contains --marker
//           (the cell printed it: it runs) cancel it with tasks/cancel; poll
//           on until the task says it ended, then (v1) ask tasks/result, and
//           cancel it again.
//   probe   for the task --task-id (another client's) and for a random id
//           nobody made: tasks/get, tasks/result (v1) or tasks/update (v2),
//           tasks/cancel, each answer or error kept; then (v1) tasks/list.
// --elicit answers each approval question asked in the task (v1: an
// elicitation/create request that comes with tasks/result; v2: the
// inputRequests of a tasks/get, answered by tasks/update): accept (approve
// true), false (accept, approve false), decline or cancel. --timeout bounds
// each request (default 120000 ms). --hold: after the action, wait until our
// stdin ends before closing (the test looks at the server meanwhile).
//
// While it runs it writes lines to stderr for the test to wait on:
//   tasks-client: task ID STATUS      (the task was made)
//   tasks-client: cancelled ID        (tasks/cancel answered)
//   tasks-client: holding             (--hold: waiting for stdin to end)
// and prints one JSON document on stdout:
//   {"sdk", "era", "server", "capabilities", "tools": [{"name", "execution"}],
//    "created": the task as made (v1: CreateTaskResult.task; v2: the tools/call result),
//    "listed": tasks/list right after (v1),
//    "statuses": [{"ms", "status", "statusMessage"}...] (every tasks/get, in order),
//    "progress": [{"ms", "progress", "message", "_meta"}...] (v1: notifications/progress),
//    "elicitations": [{"message", "_meta", "key", "answer"}...],
//    "cancel": {"result"} or {"error"}, "final": the last tasks/get's task,
//    "result": CallToolResult or null, "error": {"code", "message"} or null,
//    "after": (cancel, v1) tasks/result's {"result"} or {"error"}, once it ended,
//    "again": (cancel) a second tasks/cancel's {"result"} or {"error"}, once it ended,
//    "probes": (probe) {"theirs": {METHOD: {"result"} or {"error"}}, "unknown": {...}, "list"},
//    "unrelated": (v2) what came that answered none of its requests}
// "ms" counts from the task's creation. Errors are {"code", "message"} (v2 over
// HTTP: also "http", the status, when the transport threw). Exit 0 when it got
// that far, 1 with {"fatal": message} when connecting failed, 2 on bad usage.
import { randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport as StdioV1 } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport as HttpV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { StreamableHTTPClientTransport as HttpV2 } from "@modelcontextprotocol/client";
import { StdioClientTransport as StdioV2 } from "@modelcontextprotocol/client/stdio";

const MODERN = "2026-07-28";
const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";
const CLIENT_INFO = { name: "appliance-tests-tasks-client", version: "1.0.0" };

function usage(msg) {
  process.stderr.write(`tasks-client: ${msg}\n` +
    "usage: node tasks-client.mjs --sdk v1|v2 [--action run|cancel|probe] [--code SRC] ... " +
    "-- COMMAND [ARG...] | --url URL [--token TOKEN]\n");
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { sdk: null, action: "run", code: null, ttl: null, marker: null, elicit: null,
                 taskId: null, timeout: 120000, hold: false, command: null, args: [], url: null,
                 token: null };
  const num = (s) => {
    const n = Number(s);
    if (!Number.isInteger(n) || n <= 0) usage(`not a positive integer: ${s}`);
    return n;
  };
  let i = 0;
  for (; i < argv.length && argv[i] !== "--"; i++) {
    const a = argv[i], more = i + 1 < argv.length;
    if (a === "--sdk" && more) opts.sdk = argv[++i];
    else if (a === "--action" && more) opts.action = argv[++i];
    else if (a === "--code" && more) opts.code = argv[++i];
    else if (a === "--ttl" && more) opts.ttl = num(argv[++i]);
    else if (a === "--marker" && more) opts.marker = argv[++i];
    else if (a === "--elicit" && more) opts.elicit = argv[++i];
    else if (a === "--task-id" && more) opts.taskId = argv[++i];
    else if (a === "--timeout" && more) opts.timeout = num(argv[++i]);
    else if (a === "--hold") opts.hold = true;
    else if (a === "--url" && more) opts.url = argv[++i];
    else if (a === "--token" && more) opts.token = argv[++i];
    else usage(`unknown option ${a}`);
  }
  if (!["v1", "v2"].includes(opts.sdk)) usage("--sdk v1 or v2");
  if (!["run", "cancel", "probe"].includes(opts.action)) usage(`--action ${opts.action}?`);
  if (opts.action !== "probe" && opts.code === null) usage(`--action ${opts.action} needs --code`);
  if (opts.action === "cancel" && !opts.marker) usage("--action cancel needs --marker");
  if (opts.action === "probe" && !opts.taskId) usage("--action probe needs --task-id");
  if (opts.elicit && !["accept", "false", "decline", "cancel"].includes(opts.elicit))
    usage(`--elicit ${opts.elicit}?`);
  if (opts.url) return opts;
  if (i + 1 >= argv.length) usage("no command after -- (or --url)");
  opts.command = argv[i + 1];
  opts.args = argv.slice(i + 2);
  return opts;
}

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

function say(line) {
  process.stderr.write(`tasks-client: ${line}\n`);
}

function answerFor(how) {
  if (how === "accept") return { action: "accept", content: { approve: true } };
  if (how === "false") return { action: "accept", content: { approve: false } };
  return { action: how };
}

// Until our stdin ends (the test closes it when it has looked).
function stdinEnded() {
  return new Promise((done) => {
    process.stdin.on("end", done);
    process.stdin.on("close", done);
    process.stdin.resume();
  });
}

function errorOf(e) {
  const out = { code: e?.code ?? null, message: String(e?.message ?? e) };
  if (e?.data !== undefined) out.data = e.data;
  return out;
}

async function attempt(fn) {
  try {
    return { result: await fn() };
  } catch (e) {
    return { error: errorOf(e) };
  }
}

// ---- v1: the SDK's task runtime, 2025-11-25 ------------------------------------------

async function v1(opts, out) {
  const headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : {};
  const transport = opts.url
    ? new HttpV1(new URL(opts.url), { requestInit: { headers } })
    : new StdioV1({ command: opts.command, args: opts.args, stderr: "inherit" });
  const capabilities = opts.elicit ? { elicitation: { form: {} } } : {};
  const client = new Client(CLIENT_INFO, { capabilities });
  // the version the server answered initialize with, as the SDK hands it on
  const setVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (v) => {
    out.era = v;
    setVersion?.(v);
  };
  const timeout = opts.timeout;
  let t0 = performance.now();
  const ms = () => Math.round(performance.now() - t0);
  if (opts.elicit)
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      const answer = answerFor(opts.elicit);
      out.elicitations.push({ ms: ms(), message: request.params.message ?? null,
                              _meta: request.params._meta ?? null, answer });
      return answer;
    });
  try {
    await client.connect(transport, { timeout });
  } catch (e) {
    return { fatal: String(e?.message ?? e) };
  }
  out.server = client.getServerVersion() ?? null;
  out.capabilities = client.getServerCapabilities() ?? null;
  out.tools = (await client.listTools({}, { timeout })).tools.map(
    (t) => ({ name: t.name, execution: t.execution ?? null }));
  const tasks = client.experimental.tasks;

  if (opts.action === "probe") {
    const probe = async (id) => ({
      get: await attempt(() => tasks.getTask(id, { timeout })),
      result: await attempt(() => tasks.getTaskResult(id, CallToolResultSchema, { timeout })),
      cancel: await attempt(() => tasks.cancelTask(id, { timeout })),
    });
    out.probes = { theirs: await probe(opts.taskId),
                   unknown: await probe(randomBytes(16).toString("hex")),
                   list: await attempt(() => tasks.listTasks(undefined, { timeout })) };
  } else {
    let taskId = null, cancelled = false;
    const stream = tasks.callToolStream(
      { name: "run_python", arguments: { code: opts.code } }, CallToolResultSchema,
      { task: opts.ttl ? { ttl: opts.ttl } : {}, timeout,
        onprogress: (p) => out.progress.push({ ms: ms(), ...p }) });
    for await (const msg of stream) {
      if (msg.type === "taskCreated") {
        t0 = performance.now();
        taskId = msg.task.taskId;
        out.created = msg.task;
        say(`task ${taskId} ${msg.task.status}`);
        out.listed = await attempt(() => tasks.listTasks(undefined, { timeout }));
      } else if (msg.type === "taskStatus") {
        const t = msg.task;
        out.statuses.push({ ms: ms(), status: t.status, statusMessage: t.statusMessage ?? null });
        if (opts.action === "cancel" && !cancelled && t.status === "working" &&
            (t.statusMessage ?? "").includes(opts.marker)) {
          cancelled = true;
          out.cancel = await attempt(() => tasks.cancelTask(taskId, { timeout }));
          say(`cancelled ${taskId}`);
        }
      } else if (msg.type === "result") {
        out.result = msg.result;
      } else if (msg.type === "error") {
        out.error = errorOf(msg.error);
      }
    }
    if (taskId) {
      const last = await attempt(() => tasks.getTask(taskId, { timeout }));
      out.final = last.result ?? last;
      if (opts.action === "cancel") {
        out.after = await attempt(() => tasks.getTaskResult(taskId, CallToolResultSchema,
                                                            { timeout }));
        out.again = await attempt(() => tasks.cancelTask(taskId, { timeout }));
      }
    }
  }
  if (opts.hold) {
    say("holding");
    await stdinEnded();
  }
  await client.close();
  return null;
}

// ---- v2: the SDK's transport, raw 2026-07-28 requests --------------------------------

// JSON-RPC over one of the v2 SDK's transports: each request carries the
// 2026-07-28 _meta; its answer (result or error) is what request() gives.
class Raw {
  constructor(transport, capabilities, timeout) {
    this.transport = transport;
    this.meta = { "io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientCapabilities": capabilities };
    this.timeout = timeout;
    this.next = 1;
    this.waiting = new Map();
    this.other = []; // what came that answers nothing of ours
    transport.onmessage = (m) => this.onmessage(m);
    transport.onerror = (e) => this.other.push({ transportError: String(e?.message ?? e) });
  }

  onmessage(m) {
    const w = "method" in m ? undefined : this.waiting.get(m.id);
    if (!w) {
      this.other.push(m);
      return;
    }
    this.waiting.delete(m.id);
    clearTimeout(w.timer);
    w.done(m.error ? { error: m.error } : { result: m.result });
  }

  request(method, params = {}) {
    const id = this.next++;
    const msg = { jsonrpc: "2.0", id, method, params: { ...params, _meta: this.meta } };
    return new Promise((done) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        done({ error: { code: null, message: `${method}: no answer in ${this.timeout} ms` } });
      }, this.timeout);
      this.waiting.set(id, { done, timer });
      this.transport.send(msg).catch((e) => {
        if (!this.waiting.has(id)) return;
        this.waiting.delete(id);
        clearTimeout(timer);
        const error = { code: e?.code ?? null, message: String(e?.message ?? e) };
        if (e?.data?.status !== undefined) error.http = e.data.status;
        done({ error });
      });
    });
  }
}

async function v2(opts, out) {
  const headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : {};
  const transport = opts.url
    ? new HttpV2(new URL(opts.url), { requestInit: { headers } })
    : new StdioV2({ command: opts.command, args: opts.args, stderr: "inherit" });
  const caps = { extensions: { [TASKS_EXTENSION]: {} } };
  if (opts.elicit) caps.elicitation = { form: {} };
  const raw = new Raw(transport, caps, opts.timeout);
  let t0 = performance.now();
  const ms = () => Math.round(performance.now() - t0);
  try {
    await transport.start();
    const d = await raw.request("server/discover");
    if (d.error) throw new Error(`server/discover: ${JSON.stringify(d.error)}`);
    out.era = MODERN;
    out.server = d.result._meta?.["io.modelcontextprotocol/serverInfo"] ?? null;
    out.capabilities = d.result.capabilities;
    const l = await raw.request("tools/list");
    if (l.error) throw new Error(`tools/list: ${JSON.stringify(l.error)}`);
    out.tools = l.result.tools.map((t) => ({ name: t.name, execution: t.execution ?? null }));
  } catch (e) {
    await transport.close().catch(() => {});
    return { fatal: String(e?.message ?? e) };
  }

  if (opts.action === "probe") {
    const probe = async (taskId) => ({
      get: await raw.request("tasks/get", { taskId }),
      update: await raw.request("tasks/update", { taskId, inputResponses: {} }),
      cancel: await raw.request("tasks/cancel", { taskId }),
    });
    out.probes = { theirs: await probe(opts.taskId),
                   unknown: await probe(randomBytes(16).toString("hex")) };
  } else {
    const made = await raw.request("tools/call",
                                   { name: "run_python", arguments: { code: opts.code } });
    t0 = performance.now();
    if (made.error || made.result.resultType !== "task") {
      out.created = made.result ?? null;
      out.error = made.error ?? { code: null, message: "tools/call made no task" };
    } else {
      const taskId = made.result.taskId;
      out.created = made.result;
      say(`task ${taskId} ${made.result.status}`);
      let poll = made.result.pollIntervalMs ?? 1000, cancelled = false;
      const answered = new Set();
      for (;;) {
        await sleep(poll);
        const g = await raw.request("tasks/get", { taskId });
        if (g.error) {
          out.error = g.error;
          break;
        }
        const t = g.result;
        out.final = t;
        out.statuses.push({ ms: ms(), status: t.status, statusMessage: t.statusMessage ?? null });
        poll = t.pollIntervalMs ?? poll;
        if (["completed", "failed", "cancelled"].includes(t.status)) {
          out.result = t.result ?? null;
          if (opts.action === "cancel") out.again = await raw.request("tasks/cancel", { taskId });
          break;
        }
        if (t.status === "input_required" && opts.elicit) {
          const responses = {};
          for (const [key, r] of Object.entries(t.inputRequests ?? {})) {
            if (answered.has(key)) continue;
            answered.add(key);
            responses[key] = answerFor(opts.elicit);
            out.elicitations.push({ ms: ms(), key, method: r.method,
                                    message: r.params?.message ?? null, answer: responses[key] });
          }
          if (Object.keys(responses).length) {
            const u = await raw.request("tasks/update", { taskId, inputResponses: responses });
            if (u.error) out.error = u.error;
          }
          poll = 200; // the answer lets it go on: look again soon
        }
        if (opts.action === "cancel" && !cancelled && t.status === "working" &&
            (t.statusMessage ?? "").includes(opts.marker)) {
          cancelled = true;
          out.cancel = await raw.request("tasks/cancel", { taskId });
          say(`cancelled ${taskId}`);
          poll = 200;
        }
      }
    }
  }
  out.unrelated = raw.other;
  if (opts.hold) {
    say("holding");
    await stdinEnded();
  }
  await transport.close().catch(() => {});
  return null;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const out = { sdk: opts.sdk, era: null, server: null, capabilities: null, tools: [],
                created: null, statuses: [], progress: [], elicitations: [], cancel: null,
                final: null, result: null, error: null };
  const fatal = await (opts.sdk === "v1" ? v1 : v2)(opts, out);
  if (fatal) {
    process.stdout.write(JSON.stringify({ ...fatal, ...out }) + "\n");
    process.exit(1);
  }
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exit(0);
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ fatal: String(e?.stack ?? e) }) + "\n");
  process.exit(1);
});

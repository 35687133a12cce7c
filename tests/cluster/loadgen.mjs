// loadgen.mjs: the cluster demo's clients (scripts/cluster-demo, bench/cluster.py).
// Many clients of the v2 TypeScript SDK (@modelcontextprotocol/client 2.4), in
// parallel in this one process, each a StreamableHTTPClientTransport to URL
// (HAProxy's frontend, or one replica) pinned to revision 2026-07-28 and
// declaring form elicitation, whose handler says yes to every question
// ({action: "accept", content: {approve: true}}).
//
//   node loadgen.mjs --url URL --tokens FILE [--clients N] [--duration S]
//       [--write-every K] [--timeout MS] [--tag TEXT]
//
// --tokens: a file of bearer tokens, one a line; client i sends token
// i mod their count (one each is best: the appliance counts its limits per
// client). Each client loops until --duration seconds have passed since the
// start: run_python cells that print a text of their own, and every K-th
// request (0: never) an approved write, `r = await w.record(id=ID)` and
// `print(r)`, ID unique in the run (TAG-client-seq). The SDK answers the
// appliance's input_required itself and retries the call with the
// requestState; that retry may reach another replica. A write is never sent
// again by this program: a new request would be a new approval, and so
// possibly a second write.
//
// Each request is classified:
//   ok         a result whose output is what the code prints;
//   retryable  nothing of it can have run twice, and it may be sent again:
//              HTTP 502, 503 (the appliance's "draining" among them), 504;
//              a connection refused, reset, or cut before the answer; an
//              approved call the ledger kept from being made (made before
//              by a try whose answer was lost, or the ledger not answering:
//              RETRYABLE_TEXTS);
//   failed     anything else (a wrong output, a tool error, a JSON-RPC
//              error, a timeout).
// It prints one JSON document on stdout:
//   {"requests", "ok", "retryable", "failed", "seconds", "cells_per_s",
//    "latency_ms": {"ok": {"p50", "p95", "max"}},
//    "reasons": {"retryable: http 502": N, ...},
//    "writes": {"sent", "ok", "retryable", "failed", "ok_ids": [...],
//               "unsure_ids": [...]}, "elicitations", "connects_failed",
//    "examples": [{"kind", "class", "reason", "id"}...] (the first failures)}
// unsure_ids: writes that were sent and not answered ok (the write may or may
// not have been made). Exit 0 once it printed that, 2 on bad usage.
import { readFileSync } from 'node:fs';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const REVISION = '2026-07-28';

function usage(msg) {
    process.stderr.write(`loadgen: ${msg}\n`);
    process.exit(2);
}

function parseArgs(argv) {
    const o = { url: null, tokens: null, clients: 6, duration: 30, writeEvery: 4, timeout: 60000,
                tag: Date.now().toString(36) };
    const num = (s, min) => {
        const n = Number(s);
        if (!Number.isFinite(n) || n < min) usage(`not a number >= ${min}: ${s}`);
        return n;
    };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i], v = argv[i + 1];
        if (v === undefined) usage(`${a} needs a value`);
        if (a === '--url') o.url = v;
        else if (a === '--tokens') o.tokens = v;
        else if (a === '--clients') o.clients = Math.floor(num(v, 1));
        else if (a === '--duration') o.duration = num(v, 0.1);
        else if (a === '--write-every') o.writeEvery = Math.floor(num(v, 0));
        else if (a === '--timeout') o.timeout = Math.floor(num(v, 1000));
        else if (a === '--tag') o.tag = v;
        else usage(`unknown option ${a}`);
        i++;
    }
    if (!o.url || !o.tokens) usage('--url and --tokens are required');
    if (!/^[A-Za-z0-9_-]{1,32}$/.test(o.tag)) usage('--tag: 1 to 32 of A-Z a-z 0-9 _ -');
    return o;
}

// Network failures as Node's fetch (undici) reports them: the code of the
// error or of its cause.
const NET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET',
                           'UND_ERR_CLOSED', 'UND_ERR_CONNECT_TIMEOUT']);

function netCode(e) {
    for (let x = e, depth = 0; x && depth < 4; x = x.cause, depth++)
        if (typeof x.code === 'string' && NET_CODES.has(x.code)) return x.code;
    return null;
}

// The replicas' own refusals that mean "nothing ran twice: send it again", as
// the cell's ToolError says them (pkg/bridge/run.c, on_claim): the approved
// call was claimed in the ledger by an earlier try of the run whose answer
// was lost (its replica died between claiming and storing the result), or
// the ledger did not answer; either way the call was not made here. Matched
// against a cell's error text and a JSON-RPC error's message.
const RETRYABLE_TEXTS = [
    [/approved and made before by a try of this run whose answer was lost; not made again/,
     'approved call made before, not made again'],
    [/approved, but the ledger the replicas share did not answer; not made/,
     'the ledger did not answer'],
];

function retryableText(text) {
    return RETRYABLE_TEXTS.find(([re]) => re.test(text))?.[1] ?? null;
}

// What became of a request that threw: [class, reason].
function classifyError(e, cut) {
    if (cut) return ['retryable', 'stream cut'];
    const status = e?.data?.status;
    if (typeof status === 'number') {
        const text = String(e.data.text ?? '').trim();
        if (status === 503 && text === 'draining') return ['retryable', 'http 503 draining'];
        if ([502, 503, 504].includes(status)) return ['retryable', `http ${status}`];
        return ['failed', `http ${status} ${text.slice(0, 80)}`];
    }
    const net = netCode(e);
    if (net) return ['retryable', `connection ${net}`];
    if (typeof e?.code === 'number') {
        const named = retryableText(String(e.message));
        if (named) return ['retryable', named];
        return ['failed', `json-rpc ${e.code} ${String(e.message).slice(0, 120)}`];
    }
    if (e?.code === 'REQUEST_TIMEOUT') return ['failed', 'timeout'];
    return ['failed', `${e?.name ?? 'error'}: ${String(e?.message ?? e).slice(0, 120)}`];
}

// What became of a request that was answered: [class, reason].
function classifyResult(result, want) {
    const sc = result?.structuredContent;
    if (result?.isError || !sc) {
        const why = String(sc?.error ?? sc?.reason ?? JSON.stringify(result?.content ?? result));
        const named = retryableText(why);
        if (named) return ['retryable', named];
        return ['failed', `tool error: ${why.trim().split('\n').pop().slice(0, 120)}`];
    }
    if (!want(String(sc.stdout))) return ['failed', `output ${JSON.stringify(sc.stdout).slice(0, 80)}`];
    return ['ok', 'ok'];
}

function quantile(sorted, q) {
    if (!sorted.length) return null;
    return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}

async function connect(o, token, stats, deadline) {
    for (;;) {
        const client = new Client({ name: 'cluster-loadgen', version: '1.0.0' },
                                  { capabilities: { elicitation: { form: {} } },
                                    versionNegotiation: { mode: { pin: REVISION } } });
        client.setRequestHandler('elicitation/create', async () => {
            stats.elicitations++;
            return { action: 'accept', content: { approve: true } };
        });
        const transport = new StreamableHTTPClientTransport(new URL(o.url), {
            requestInit: { headers: { Authorization: `Bearer ${token}` } }
        });
        try {
            await client.connect(transport, { timeout: o.timeout });
            return client;
        } catch (e) {
            stats.connectsFailed++;
            await client.close().catch(() => {});
            if (Date.now() >= deadline) return null;
            await new Promise(r => setTimeout(r, 200));
        }
    }
}

async function oneClient(o, n, token, stats, deadline) {
    const client = await connect(o, token, stats, deadline);
    if (!client) return;
    // A cut answer stream (the replica died mid-answer) is reported to
    // onerror, and the call itself would wait for its timeout: the one call
    // in flight is aborted at once instead.
    let inflight = null;
    client.onerror = (e) => {
        if (inflight && /SSE stream disconnected/.test(String(e?.message ?? e))) {
            inflight.cut = true;
            inflight.ac.abort(new Error('the answer stream was cut'));
        }
    };
    for (let seq = 1; Date.now() < deadline; seq++) {
        const write = o.writeEvery > 0 && seq % o.writeEvery === 0;
        const id = `${o.tag}-c${n}-${seq}`;
        let code, want;
        if (write) {
            code = `r = await w.record(id=${JSON.stringify(id)})\nprint(r)`;
            const re = new RegExp(`^\\{'recorded': '${id}', 'n': \\d+\\}\\n$`);
            want = (out) => re.test(out);
        } else {
            code = `print(${JSON.stringify(id)})`;
            want = (out) => out === `${id}\n`;
        }
        inflight = { ac: new AbortController(), cut: false };
        const t0 = performance.now();
        let cls, reason;
        try {
            const result = await client.callTool({ name: 'run_python', arguments: { code } },
                                                 { timeout: o.timeout, signal: inflight.ac.signal });
            [cls, reason] = classifyResult(result, want);
        } catch (e) {
            [cls, reason] = classifyError(e, inflight.cut);
        }
        const ms = performance.now() - t0;
        inflight = null;
        stats.record(write ? 'write' : 'plain', cls, reason, id, ms);
    }
    await client.close().catch(() => {});
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const tokens = readFileSync(o.tokens, 'utf8').split('\n').map(s => s.trim()).filter(Boolean);
    if (!tokens.length) usage(`${o.tokens}: no token`);
    const stats = {
        requests: 0, ok: 0, retryable: 0, failed: 0, reasons: {}, okMs: [],
        writes: { sent: 0, ok: 0, retryable: 0, failed: 0, ok_ids: [], unsure_ids: [] },
        elicitations: 0, connectsFailed: 0, examples: [],
        record(kind, cls, reason, id, ms) {
            this.requests++;
            this[cls]++;
            if (cls !== 'ok') {
                const key = `${cls}: ${reason}`;
                this.reasons[key] = (this.reasons[key] ?? 0) + 1;
                if (cls === 'failed' && this.examples.length < 20)
                    this.examples.push({ kind, class: cls, reason, id });
            } else this.okMs.push(ms);
            if (kind !== 'write') return;
            this.writes.sent++;
            this.writes[cls]++;
            (cls === 'ok' ? this.writes.ok_ids : this.writes.unsure_ids).push(id);
        }
    };
    const t0 = performance.now();
    const deadline = Date.now() + o.duration * 1000;
    await Promise.all(Array.from({ length: o.clients },
                                 (_, i) => oneClient(o, i + 1, tokens[i % tokens.length], stats, deadline)));
    const seconds = (performance.now() - t0) / 1000;
    const sorted = stats.okMs.sort((a, b) => a - b);
    const r3 = (x) => x === null ? null : Math.round(x * 1000) / 1000;
    process.stdout.write(JSON.stringify({
        requests: stats.requests, ok: stats.ok, retryable: stats.retryable, failed: stats.failed,
        seconds: r3(seconds), cells_per_s: r3(stats.ok / seconds),
        latency_ms: { ok: { p50: r3(quantile(sorted, 0.5)), p95: r3(quantile(sorted, 0.95)),
                            max: r3(sorted.at(-1) ?? null) } },
        reasons: stats.reasons, writes: stats.writes, elicitations: stats.elicitations,
        connects_failed: stats.connectsFailed, examples: stats.examples
    }) + '\n');
}

main().catch((e) => {
    process.stderr.write(`loadgen: ${e?.stack ?? e}\n`);
    process.exit(1);
});

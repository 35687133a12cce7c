// Test fixture for the HTTP upstream tests: a stateless MCP server that speaks
// ONLY protocol revision 2026-07-28 over Streamable HTTP, built on the v2
// TypeScript SDK (@modelcontextprotocol/server 2.4.0, createMcpHandler with
// legacy: 'reject'). A legacy-only client (initialize handshake) cannot use it.
//
// Usage: node v2_http_server.mjs PORT [TOKEN]
//   Listens on 127.0.0.1:PORT at /mcp (PORT 0 = any free port) and prints
//   "listening PORT" on stdout. With TOKEN, requests must carry
//   "Authorization: Bearer TOKEN" or get HTTP 401.
// stderr gets one line per request: "request METHOD [mcp-method=..] [mcp-name=..]
// [traceparent=..] [meta-traceparent=..]" (the header, and params._meta.traceparent),
// plus "unauthorized" for refused requests and "cancelled sleep" when a sleep
// call is aborted by the client.
// Tools: echo {text}, add {a,b}, sleep {ms}, grow {} (adds tool "extra" and
// sends notifications/tools/list_changed on subscriptions/listen streams).
import http from 'node:http';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';

const REVISION = '2026-07-28';
const port = Number(process.argv[2] ?? 0);
const token = process.argv[3];
const log = line => process.stderr.write(line + '\n');
const text = t => ({ content: [{ type: 'text', text: t }] });

let grown = false; // process-wide state: every request gets a fresh McpServer

function factory() {
    const server = new McpServer(
        { name: 'v2-http-fixture', version: '1.0.0' },
        { capabilities: { tools: { listChanged: true } }, supportedProtocolVersions: [REVISION] }
    );
    const ro = { readOnlyHint: true };
    server.registerTool('echo', { description: 'Echo text', inputSchema: z.object({ text: z.string() }), annotations: ro },
        async ({ text: t }) => text(t));
    server.registerTool('add', { description: 'Add two numbers', inputSchema: z.object({ a: z.number(), b: z.number() }), annotations: ro },
        async ({ a, b }) => text(String(a + b)));
    server.registerTool('sleep', { description: 'Wait ms milliseconds', inputSchema: z.object({ ms: z.number() }), annotations: ro },
        async ({ ms }, ctx) => {
            const signal = ctx.mcpReq.signal;
            await new Promise(resolve => {
                const onAbort = () => { clearTimeout(timer); log('cancelled sleep'); resolve(); };
                const timer = setTimeout(() => { signal.removeEventListener('abort', onAbort); resolve(); }, ms);
                signal.addEventListener('abort', onAbort, { once: true });
            });
            return text('slept');
        });
    server.registerTool('grow', { description: 'Register tool "extra"', inputSchema: z.object({}), annotations: { readOnlyHint: false } },
        async () => {
            grown = true;
            handler.notify.toolsChanged(); // delivered on open subscriptions/listen streams
            return text('grown');
        });
    if (grown) {
        server.registerTool('extra', { description: 'Added by grow', inputSchema: z.object({}) }, async () => text('extra'));
    }
    return server;
}

const handler = createMcpHandler(factory, { legacy: 'reject', onerror: e => log(`sdk error: ${e.message}`) });

function describe(body, headers) {
    let methods = ['-'], metaTrace;
    try {
        const msg = JSON.parse(body.toString('utf8'));
        methods = (Array.isArray(msg) ? msg : [msg]).map(m => m?.method ?? '-');
        metaTrace = Array.isArray(msg) ? undefined : msg?.params?._meta?.traceparent;
    } catch { /* not JSON: no method */ }
    let line = `request ${methods.join(',')}`;
    if (headers['mcp-method'] !== undefined) line += ` mcp-method=${headers['mcp-method']}`;
    if (headers['mcp-name'] !== undefined) line += ` mcp-name=${headers['mcp-name']}`;
    if (headers['traceparent'] !== undefined) line += ` traceparent=${headers['traceparent']}`;
    if (metaTrace !== undefined) line += ` meta-traceparent=${metaTrace}`;
    return line;
}

const httpServer = http.createServer(async (req, res) => {
    try {
        const url = new URL(req.url, `http://${req.headers.host ?? '127.0.0.1'}`);
        if (url.pathname !== '/mcp') { res.writeHead(404).end('not found\n'); return; }
        if (token !== undefined && req.headers.authorization !== `Bearer ${token}`) {
            log('unauthorized');
            res.writeHead(401, { 'WWW-Authenticate': 'Bearer' }).end('unauthorized\n');
            return;
        }
        const chunks = [];
        for await (const c of req) chunks.push(c);
        const body = Buffer.concat(chunks);
        log(describe(body, req.headers));

        // Abort the web Request when the client goes away before we finish:
        // the SDK turns that into ctx.mcpReq.signal for the running handler.
        const abort = new AbortController();
        res.on('close', () => { if (!res.writableFinished) abort.abort(); });
        const headers = new Headers();
        for (const [k, v] of Object.entries(req.headers)) {
            for (const one of Array.isArray(v) ? v : [v]) headers.append(k, one);
        }
        const request = new Request(url, {
            method: req.method, headers, signal: abort.signal,
            body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body
        });
        const response = await handler.fetch(request);

        res.writeHead(response.status, Object.fromEntries(response.headers));
        if (!response.body) { res.end(); return; }
        const reader = response.body.getReader();
        abort.signal.addEventListener('abort', () => reader.cancel().catch(() => {}), { once: true });
        for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            res.write(value);
        }
        res.end();
    } catch (e) {
        if (!res.headersSent) res.writeHead(500).end(String(e?.message ?? e) + '\n');
        else res.destroy();
    }
});

httpServer.listen(port, '127.0.0.1', () => {
    process.stdout.write(`listening ${httpServer.address().port}\n`);
});

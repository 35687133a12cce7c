// writes_server.mjs: the upstream of the cluster demo (scripts/cluster-demo;
// docs/scale-out.md, "Trying it"). A stateless MCP server of revision 2026-07-28
// over Streamable HTTP, built on the v2 TypeScript SDK
// (@modelcontextprotocol/server 2.4, createMcpHandler with legacy: 'reject',
// as tests/integration/v2_http_server.mjs), whose one tool is a write that
// counts: what the replicas did to it, whatever they told their clients.
//
// Usage: node writes_server.mjs PORT
//   Listens on 127.0.0.1:PORT (0: any free port) and prints "listening PORT"
//   on stdout once it does.
//   POST /mcp     MCP. Tool `record` {id: string} (readOnlyHint false): counts
//                 one more call for id and answers {"recorded": id, "n": count}
//                 as structuredContent (n: this id's calls so far, this one
//                 included).
//   GET /counts   200, the JSON object id -> number of `record` calls.
//   anything else 404.
// SIGTERM and SIGINT end it.
import http from 'node:http';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';

const REVISION = '2026-07-28';
const port = Number(process.argv[2] ?? 0);
// An id is what the load generator makes (client, sequence, random); the cap
// keeps a stray caller from growing the map without end.
const ID_MAX = 128;
const counts = new Map();

function factory() {
    const server = new McpServer(
        { name: 'cluster-writes', version: '1.0.0' },
        { capabilities: { tools: {} }, supportedProtocolVersions: [REVISION] }
    );
    server.registerTool('record', {
        description: 'Record one write of id; answers how many writes of id were recorded',
        inputSchema: z.object({ id: z.string().min(1).max(ID_MAX) }),
        outputSchema: z.object({ recorded: z.string(), n: z.number().int() }),
        annotations: { readOnlyHint: false, idempotentHint: false }
    }, async ({ id }) => {
        const n = (counts.get(id) ?? 0) + 1;
        counts.set(id, n);
        const out = { recorded: id, n };
        return { content: [{ type: 'text', text: JSON.stringify(out) }], structuredContent: out };
    });
    return server;
}

const handler = createMcpHandler(factory, {
    legacy: 'reject',
    onerror: e => process.stderr.write(`writes_server: sdk error: ${e.message}\n`)
});

async function mcp(req, res, url) {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers))
        for (const one of Array.isArray(v) ? v : [v]) headers.append(k, one);
    const response = await handler.fetch(new Request(url, {
        method: req.method, headers,
        body: req.method === 'GET' || req.method === 'HEAD' ? undefined : Buffer.concat(chunks)
    }));
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (!response.body) { res.end(); return; }
    const reader = response.body.getReader();
    for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        res.write(value);
    }
    res.end();
}

const httpServer = http.createServer(async (req, res) => {
    try {
        const url = new URL(req.url, 'http://127.0.0.1');
        if (url.pathname === '/counts' && req.method === 'GET') {
            const body = JSON.stringify(Object.fromEntries(counts)) + '\n';
            res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
            res.end(body);
        } else if (url.pathname === '/mcp') {
            await mcp(req, res, url);
        } else {
            res.writeHead(404).end('not found\n');
        }
    } catch (e) {
        if (!res.headersSent) res.writeHead(500).end(String(e?.message ?? e) + '\n');
        else res.destroy();
    }
});

for (const sig of ['SIGTERM', 'SIGINT'])
    process.on(sig, () => { httpServer.close(); httpServer.closeAllConnections(); process.exit(0); });

httpServer.listen(port, '127.0.0.1', () => {
    process.stdout.write(`listening ${httpServer.address().port}\n`);
});

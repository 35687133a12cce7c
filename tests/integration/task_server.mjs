// Test fixture for calls of tools that run only as MCP tasks: a 2025-11-25
// server on the v1 TypeScript SDK (@modelcontextprotocol/sdk 1.x, its
// experimental task support with an in-memory task store), over stdio or
// Streamable HTTP.
//
// Usage: node task_server.mjs            (stdio)
//        node task_server.mjs --http PORT (127.0.0.1:PORT at /mcp, stateful
//                                          sessions; prints "listening PORT")
// Tools:
//   slow {ms, text}: execution.taskSupport "required"; the task works for ms
//     milliseconds (statusMessage says so), then completes with the text
//     "slow: TEXT after MS ms". pollInterval 300 ms.
//   echo {text}: a plain tool, for comparison.
// stderr gets one line per event: "task made ID", "task status ID STATUS"
// (each status the store is told, "cancelled" when a client's tasks/cancel
// arrives), "task result ID".
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks';
import { z } from 'zod';

const log = line => process.stderr.write(`task-server: ${line}\n`);

class LoggedStore extends InMemoryTaskStore {
    async updateTaskStatus(taskId, status, message, sessionId) {
        log(`task status ${taskId} ${status}`);
        return super.updateTaskStatus(taskId, status, message, sessionId);
    }
}

function make() {
    const taskStore = new LoggedStore();
    const server = new McpServer({ name: 'task-fixture', version: '1.0.0' }, {
        capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
        taskStore,
        taskMessageQueue: new InMemoryTaskMessageQueue(),
    });
    server.registerTool('echo', { description: 'Echo text', inputSchema: { text: z.string() },
                                  annotations: { readOnlyHint: true } },
        async ({ text }) => ({ content: [{ type: 'text', text }] }));
    server.experimental.tasks.registerToolTask('slow', {
        description: 'Work for ms milliseconds as a task, then answer with text',
        inputSchema: { ms: z.number().int().min(0).max(600000), text: z.string() },
        execution: { taskSupport: 'required' },
        annotations: { readOnlyHint: true },
    }, {
        createTask: async ({ ms, text }, extra) => {
            const task = await extra.taskStore.createTask({ ttl: 600000, pollInterval: 300 });
            log(`task made ${task.taskId}`);
            setTimeout(async () => {
                const now = await extra.taskStore.getTask(task.taskId);
                if (!now || now.status !== 'working')
                    return; // cancelled meanwhile: no result
                await extra.taskStore.storeTaskResult(task.taskId, 'completed',
                    { content: [{ type: 'text', text: `slow: ${text} after ${ms} ms` }] });
                log(`task result ${task.taskId}`);
            }, ms);
            await extra.taskStore.updateTaskStatus(task.taskId, 'working', `working for ${ms} ms`);
            return { task };
        },
        getTask: async (args, extra) => extra.taskStore.getTask(extra.taskId),
        getTaskResult: async (args, extra) => extra.taskStore.getTaskResult(extra.taskId),
    });
    return server;
}

if (process.argv[2] === '--http') {
    const transports = new Map();
    const httpServer = http.createServer(async (req, res) => {
        if (!req.url.startsWith('/mcp')) { res.writeHead(404).end(); return; }
        let body;
        if (req.method === 'POST') {
            const chunks = [];
            for await (const c of req) chunks.push(c);
            body = JSON.parse(Buffer.concat(chunks).toString() || 'null');
        }
        const sid = req.headers['mcp-session-id'];
        let transport = sid && transports.get(sid);
        if (!transport) {
            if (req.method !== 'POST' || body?.method !== 'initialize') {
                res.writeHead(404).end('no such session\n');
                return;
            }
            transport = new StreamableHTTPServerTransport({
                sessionIdGenerator: () => randomUUID(),
                onsessioninitialized: id => transports.set(id, transport),
            });
            await make().connect(transport);
        }
        await transport.handleRequest(req, res, body);
    });
    httpServer.listen(Number(process.argv[3] ?? 0), '127.0.0.1', () => {
        process.stdout.write(`listening ${httpServer.address().port}\n`);
    });
} else {
    await make().connect(new StdioServerTransport());
}

import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { answerText, teacherTurn, type TeacherMessage } from './grep-teacher';

/**
 * The grep teacher (grep-teacher.ts) behind a real OpenAI-compatible Chat Completions endpoint on 127.0.0.1, so
 * the RFT stage samples it exactly as it samples any teacher (`rft.teacher.baseUrl`). Non-streaming
 * `POST /v1/chat/completions` and `GET /v1/models`; anything else is a 404 in OpenAI's error shape.
 */
export interface TeacherServer {
  baseUrl: string;
  model: string;
  /** Chat completions answered so far. */
  requests: () => number;
  close: () => Promise<void>;
}

export const TEACHER_MODEL = 'grep-teacher';

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function completion(messages: TeacherMessage[], requestIndex: number) {
  const turn = teacherTurn(messages);
  const message =
    turn.kind === 'grep'
      ? {
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              id: `call_${requestIndex}_0`,
              type: 'function',
              function: { name: 'grep', arguments: JSON.stringify({ pattern: turn.pattern }) },
            },
          ],
        }
      : { role: 'assistant', content: answerText(turn.files) };
  return {
    id: `chatcmpl-${randomUUID()}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: TEACHER_MODEL,
    choices: [{ index: 0, message, finish_reason: turn.kind === 'grep' ? 'tool_calls' : 'stop', logprobs: null }],
    usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
  };
}

export async function startTeacherServer(port = 0): Promise<TeacherServer> {
  let answered = 0;
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    void (async () => {
      const route = (req.url ?? '').split('?')[0]!.replace(/^\/v1/, '');
      if (req.method === 'GET' && route === '/models') {
        send(res, 200, { object: 'list', data: [{ id: TEACHER_MODEL, object: 'model', owned_by: 'codegrep' }] });
        return;
      }
      if (req.method !== 'POST' || route !== '/chat/completions') {
        send(res, 404, { error: { message: `no route ${req.method} ${req.url}`, type: 'not_found_error', code: null } });
        return;
      }
      let body: { messages?: unknown };
      try {
        body = JSON.parse(await readBody(req)) as { messages?: unknown };
      } catch (error) {
        send(res, 400, {
          error: { message: `the body is not JSON: ${(error as Error).message}`, type: 'invalid_request_error', code: null },
        });
        return;
      }
      if (!Array.isArray(body.messages)) {
        send(res, 400, { error: { message: 'messages must be an array', type: 'invalid_request_error', code: null } });
        return;
      }
      send(res, 200, completion(body.messages as TeacherMessage[], answered++));
    })().catch((error: unknown) => send(res, 500, { error: { message: String(error), type: 'server_error', code: null } }));
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${bound}/v1`,
    model: TEACHER_MODEL,
    requests: () => answered,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * A real OpenAI-compatible Chat Completions HTTP server on 127.0.0.1 whose replies come from a script.
 *
 * The LLM endpoints (judge, agent retriever, downstream agent) are the project's only outside service; tests
 * reach them through this server instead of mocking `fetch` or the `openai` package, so every request goes
 * through the real SDK, real HTTP, real timeouts and real connection handling.
 *
 * Routes: `POST /v1/chat/completions` and `POST /chat/completions` (plain JSON, or SSE when the request sets
 * `stream: true`), `GET /v1/models` and `GET /models`. Anything else is a 404 in OpenAI's error shape.
 */

export interface ScriptedToolCall {
  /** Defaults to `call_<callIndex>_<position>`. */
  id?: string;
  name: string;
  /** An object is JSON-encoded; a string is sent as is (so a test can send malformed arguments). */
  arguments: string | Record<string, unknown>;
}

export interface ScriptedUsage {
  prompt_tokens: number;
  completion_tokens: number;
}

/** What the server does with one request. Every variant may wait `delayMs` first (on top of `latencyMs`). */
export type ScriptedReply =
  | {
      type: 'text';
      content: string | null;
      /** Sent as `message.reasoning_content`, the field vLLM/SGLang reasoning parsers use. */
      reasoningContent?: string;
      finishReason?: 'stop' | 'length' | 'content_filter';
      usage?: ScriptedUsage;
      delayMs?: number;
    }
  | {
      type: 'tool_calls';
      toolCalls: ScriptedToolCall[];
      content?: string | null;
      usage?: ScriptedUsage;
      delayMs?: number;
    }
  | {
      type: 'error';
      status: number;
      /** An object is sent as JSON; a string as text/plain. Defaults to OpenAI's `{ error: { message, type, code } }`. */
      body?: unknown;
      headers?: Record<string, string>;
      delayMs?: number;
    }
  /** Never answers; the connection stays open until the client gives up or the server closes. */
  | { type: 'hang' }
  /** A body that is not JSON, sent with status 200 (or `status`) and the given content type (default application/json). */
  | { type: 'garbage'; body?: string; status?: number; contentType?: string; delayMs?: number };

/** Builders for the reply variants, so scripts read as `reply.text('RELEVANT')`. */
export const reply = {
  text: (content: string | null, extra: Omit<Extract<ScriptedReply, { type: 'text' }>, 'type' | 'content'> = {}): ScriptedReply => ({
    type: 'text',
    content,
    ...extra,
  }),
  toolCalls: (
    toolCalls: ScriptedToolCall[],
    extra: Omit<Extract<ScriptedReply, { type: 'tool_calls' }>, 'type' | 'toolCalls'> = {},
  ): ScriptedReply => ({ type: 'tool_calls', toolCalls, ...extra }),
  error: (status: number, extra: Omit<Extract<ScriptedReply, { type: 'error' }>, 'type' | 'status'> = {}): ScriptedReply => ({
    type: 'error',
    status,
    ...extra,
  }),
  hang: (): ScriptedReply => ({ type: 'hang' }),
  garbage: (extra: Omit<Extract<ScriptedReply, { type: 'garbage' }>, 'type'> = {}): ScriptedReply => ({
    type: 'garbage',
    ...extra,
  }),
};

/** The parsed JSON body of a chat completion request (only the fields the server looks at are typed). */
export interface ChatRequestBody {
  model?: string;
  messages?: Array<{ role: string; content?: unknown; tool_calls?: unknown; tool_call_id?: string }>;
  tools?: unknown[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  [key: string]: unknown;
}

export interface ScriptContext {
  /** The raw request, for scripts that branch on headers. */
  headers: IncomingMessage['headers'];
  path: string;
}

/** `callIndex` counts chat completion requests from 0, in arrival order, across the server's lifetime. */
export type ReplyScript = (body: ChatRequestBody, callIndex: number, context: ScriptContext) => ScriptedReply | Promise<ScriptedReply>;

export type RequestOutcome =
  'pending' | 'text' | 'tool_calls' | 'error' | 'garbage' | 'hang' | 'client_closed' | 'bad_request' | 'script_failed';

export interface RecordedRequest {
  /** 0-based index among chat completion requests (the script's `callIndex`). */
  callIndex: number;
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  /** Parsed JSON body; `undefined` when the body was not JSON (see `rawBody`). */
  body: ChatRequestBody | undefined;
  rawBody: string;
  receivedAt: number;
  finishedAt?: number;
  outcome: RequestOutcome;
  status?: number;
}

export interface ScriptedOpenAiServerOptions {
  script: ReplyScript;
  /** Added before every reply (ms), e.g. to measure how well a client overlaps calls. */
  latencyMs?: number;
  /** Model name echoed when the request names none. */
  defaultModel?: string;
}

export interface ScriptedOpenAiServer {
  /** `http://127.0.0.1:<port>/v1`, ready for `new OpenAI({ baseURL })`. */
  baseUrl: string;
  /** Same server without the `/v1` prefix. */
  origin: string;
  /** Every chat completion request, in arrival order. */
  requests: RecordedRequest[];
  /** Chat completion requests currently being answered (or hanging). */
  readonly inFlight: number;
  /** Highest `inFlight` seen since start (or since `resetPeak`). */
  readonly peakInFlight: number;
  resetPeak(): void;
  /** Sum of `usage` over every successful reply. */
  readonly usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  /** Cuts every connection (hung ones included) and stops listening; calling it again is harmless. */
  close(): Promise<void>;
}

/**
 * Token counts the server reports when the script gives none: one token per 4 characters of text, rounded up,
 * the usual rule of thumb. It is only a stand-in so clients that sum usage have numbers to sum; a script that
 * cares passes exact `usage`.
 */
export function approximateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

function messageText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part) =>
        part && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string' ? (part as { text: string }).text : '',
      )
      .join('');
  }
  return '';
}

function promptTokens(body: ChatRequestBody | undefined): number {
  if (!body?.messages) return 0;
  let total = 0;
  for (const message of body.messages) {
    total += approximateTokens(messageText(message.content));
    if (message.tool_calls !== undefined) total += approximateTokens(JSON.stringify(message.tool_calls));
  }
  return total;
}

const REPLY_TYPES = new Set(['text', 'tool_calls', 'error', 'hang', 'garbage']);

function sleep(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function defaultErrorBody(status: number): unknown {
  const byStatus: Record<number, [string, string]> = {
    400: ['invalid_request_error', 'Bad request'],
    401: ['invalid_request_error', 'Incorrect API key provided'],
    403: ['permission_denied', 'Permission denied'],
    404: ['not_found_error', 'The model does not exist'],
    429: ['rate_limit_exceeded', 'Rate limit reached'],
  };
  const [type, message] = byStatus[status] ?? (status >= 500 ? ['server_error', 'Internal server error'] : ['error', `HTTP ${status}`]);
  return { error: { message, type, code: status } };
}

export async function startScriptedOpenAiServer(options: ScriptedOpenAiServerOptions): Promise<ScriptedOpenAiServer> {
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  const usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  let inFlight = 0;
  let peakInFlight = 0;
  let nextCallIndex = 0;
  const created = Math.floor(Date.now() / 1000);

  function sendJson(res: ServerResponse, status: number, payload: unknown, headers: Record<string, string> = {}): void {
    const text = JSON.stringify(payload);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  }

  function completionId(callIndex: number): string {
    return `chatcmpl-scripted-${callIndex}`;
  }

  function toolCallsPayload(toolCalls: ScriptedToolCall[], callIndex: number) {
    return toolCalls.map((call, position) => ({
      id: call.id ?? `call_${callIndex}_${position}`,
      type: 'function' as const,
      function: {
        name: call.name,
        arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments),
      },
    }));
  }

  function answer(res: ServerResponse, record: RecordedRequest, scripted: Extract<ScriptedReply, { type: 'text' | 'tool_calls' }>): void {
    const body = record.body ?? {};
    const model = typeof body.model === 'string' ? body.model : (options.defaultModel ?? 'scripted-model');
    const content = scripted.content ?? null;
    const toolCalls = scripted.type === 'tool_calls' ? toolCallsPayload(scripted.toolCalls, record.callIndex) : undefined;
    const finishReason = scripted.type === 'tool_calls' ? 'tool_calls' : (scripted.finishReason ?? 'stop');
    const reasoningContent = scripted.type === 'text' ? scripted.reasoningContent : undefined;
    const replyUsage = scripted.usage ?? {
      prompt_tokens: promptTokens(record.body),
      completion_tokens:
        approximateTokens(content ?? '') +
        approximateTokens(reasoningContent ?? '') +
        (toolCalls ? approximateTokens(JSON.stringify(toolCalls)) : 0),
    };
    const fullUsage = { ...replyUsage, total_tokens: replyUsage.prompt_tokens + replyUsage.completion_tokens };
    usage.prompt_tokens += fullUsage.prompt_tokens;
    usage.completion_tokens += fullUsage.completion_tokens;
    usage.total_tokens += fullUsage.total_tokens;
    const id = completionId(record.callIndex);

    if (body.stream === true) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
      const chunk = (delta: Record<string, unknown>, finish: string | null, extra: Record<string, unknown> = {}) =>
        `data: ${JSON.stringify({
          id,
          object: 'chat.completion.chunk',
          created,
          model,
          choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
          ...extra,
        })}\n\n`;
      res.write(chunk({ role: 'assistant', content: '' }, null));
      if (reasoningContent !== undefined) res.write(chunk({ reasoning_content: reasoningContent }, null));
      if (content) res.write(chunk({ content }, null));
      if (toolCalls) res.write(chunk({ tool_calls: toolCalls.map((call, index) => ({ index, ...call })) }, null));
      res.write(chunk({}, finishReason));
      if (body.stream_options?.include_usage) {
        res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [], usage: fullUsage })}\n\n`);
      }
      res.end('data: [DONE]\n\n');
      return;
    }

    const message: Record<string, unknown> = { role: 'assistant', content, refusal: null };
    if (toolCalls) message.tool_calls = toolCalls;
    if (reasoningContent !== undefined) message.reasoning_content = reasoningContent;
    sendJson(res, 200, {
      id,
      object: 'chat.completion',
      created,
      model,
      choices: [{ index: 0, message, finish_reason: finishReason, logprobs: null }],
      usage: fullUsage,
    });
  }

  async function handleChat(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const rawBody = await readBody(req);
    let body: ChatRequestBody | undefined;
    try {
      const parsed: unknown = JSON.parse(rawBody);
      body = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as ChatRequestBody) : undefined;
    } catch {
      body = undefined;
    }
    const record: RecordedRequest = {
      callIndex: nextCallIndex++,
      method: req.method ?? 'POST',
      path,
      headers: req.headers,
      body,
      rawBody,
      receivedAt: Date.now(),
      outcome: 'pending',
    };
    requests.push(record);
    inFlight += 1;
    peakInFlight = Math.max(peakInFlight, inFlight);
    let settled = false;
    const settle = (outcome: RequestOutcome, status?: number) => {
      if (settled) return;
      settled = true;
      inFlight -= 1;
      record.outcome = outcome;
      if (status !== undefined) record.status = status;
      record.finishedAt = Date.now();
    };
    // A client that times out closes its socket: the request stops counting as in flight.
    res.on('close', () => settle('client_closed'));

    if (!body || !Array.isArray(body.messages)) {
      sendJson(res, 400, {
        error: { message: 'request body must be a JSON object with a messages array', type: 'invalid_request_error', code: 400 },
      });
      settle('bad_request', 400);
      return;
    }

    let scripted: ScriptedReply;
    try {
      scripted = await options.script(body, record.callIndex, { headers: req.headers, path });
    } catch (error) {
      sendJson(res, 500, { error: { message: `scripted server: the script threw: ${String(error)}`, type: 'script_error', code: 500 } });
      settle('script_failed', 500);
      return;
    }
    if (!scripted || typeof scripted !== 'object' || !REPLY_TYPES.has((scripted as { type?: unknown }).type as string)) {
      const got = JSON.stringify(scripted) ?? String(scripted);
      sendJson(res, 500, {
        error: { message: `scripted server: the script returned ${got}, not a ScriptedReply`, type: 'script_error', code: 500 },
      });
      settle('script_failed', 500);
      return;
    }

    if (scripted.type === 'hang') {
      record.outcome = 'hang';
      return;
    }
    await sleep((options.latencyMs ?? 0) + (scripted.delayMs ?? 0));
    if (res.destroyed || res.writableEnded) return;

    switch (scripted.type) {
      case 'text':
      case 'tool_calls':
        answer(res, record, scripted);
        settle(scripted.type, 200);
        return;
      case 'error': {
        const payload = scripted.body ?? defaultErrorBody(scripted.status);
        if (typeof payload === 'string') {
          res.writeHead(scripted.status, { 'content-type': 'text/plain', ...scripted.headers });
          res.end(payload);
        } else {
          sendJson(res, scripted.status, payload, scripted.headers);
        }
        settle('error', scripted.status);
        return;
      }
      case 'garbage': {
        const status = scripted.status ?? 200;
        res.writeHead(status, { 'content-type': scripted.contentType ?? 'application/json' });
        res.end(scripted.body ?? '<html>502 upstream hiccup {not json');
        settle('garbage', status);
        return;
      }
    }
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const path = url.pathname.replace(/\/+$/, '');
    if (req.method === 'POST' && (path === '/v1/chat/completions' || path === '/chat/completions')) {
      handleChat(req, res, path).catch((error: unknown) => {
        if (!res.headersSent) sendJson(res, 500, { error: { message: String(error), type: 'server_error', code: 500 } });
        else res.destroy();
      });
      return;
    }
    if (req.method === 'GET' && (path === '/v1/models' || path === '/models')) {
      const id = options.defaultModel ?? 'scripted-model';
      sendJson(res, 200, { object: 'list', data: [{ id, object: 'model', created, owned_by: 'scripted' }] });
      return;
    }
    sendJson(res, 404, { error: { message: `no route ${req.method} ${path}`, type: 'not_found_error', code: 404 } });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  let closing: Promise<void> | undefined;

  return {
    baseUrl: `${origin}/v1`,
    origin,
    requests,
    get inFlight() {
      return inFlight;
    },
    get peakInFlight() {
      return peakInFlight;
    },
    resetPeak() {
      peakInFlight = inFlight;
    },
    get usage() {
      return { ...usage };
    },
    close() {
      closing ??= new Promise<void>((resolve, reject) => {
        // Hanging requests would keep server.close() waiting forever: cut every connection.
        for (const socket of sockets) socket.destroy();
        server.close((error) => (error ? reject(error) : resolve()));
      });
      return closing;
    },
  };
}

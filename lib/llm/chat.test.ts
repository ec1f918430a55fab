import { afterEach, describe, expect, it } from 'vitest';
import { reply, startScriptedOpenAiServer, type ReplyScript, type ScriptedOpenAiServer } from '../../test/support/scripted-openai-server';
import { createChatCompletion } from './chat';
import { createLlmClient } from './client';
import { LlmAuthError, LlmNotFoundError, LlmRequestRejectedError, LlmRetriesExhaustedError } from './errors';
import type { RetryPolicy } from './retry';

let server: ScriptedOpenAiServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const fast: Partial<RetryPolicy> = { baseDelayMs: 1, maxDelayMs: 4, timeoutMs: 2_000, maxAttempts: 4 };

async function setup(script: ReplyScript, apiKey?: string) {
  server = await startScriptedOpenAiServer({ script });
  const llm = createLlmClient({ baseUrl: server.baseUrl, model: 'judge-model', ...(apiKey ? { apiKey } : {}) });
  return { server, llm };
}

const messages = [{ role: 'user' as const, content: 'Is this file relevant?' }];

describe('createChatCompletion against a real HTTP server', () => {
  it('sends the endpoint model and the key, and returns the completion with one attempt', async () => {
    const { server, llm } = await setup(() => reply.text('RELEVANT'), 'sk-local');
    const result = await createChatCompletion(llm, { messages, temperature: 0 }, { policy: fast });
    expect(result.completion.choices[0]?.message.content).toBe('RELEVANT');
    expect(result.attempts).toBe(1);
    expect(result.latencyMs).toBeGreaterThan(0);
    expect(server.requests[0]?.body).toMatchObject({ model: 'judge-model', temperature: 0, stream: false, messages });
    expect(server.requests[0]?.headers.authorization).toBe('Bearer sk-local');
  });

  it('retries 429 after the Retry-After the server asked for, not the tiny backoff', async () => {
    const { server, llm } = await setup((_b, i) => (i === 0 ? reply.error(429, { headers: { 'retry-after': '0.3' } }) : reply.text('ok')));
    const retries: Array<{ reason: string; delayMs: number }> = [];
    const result = await createChatCompletion(llm, { messages }, { policy: fast, onRetry: (e) => retries.push(e) });
    expect(result.attempts).toBe(2);
    expect(retries).toEqual([{ attempt: 1, reason: 'HTTP 429: Rate limit reached', delayMs: 300 }]);
    const gap = server.requests[1]!.receivedAt - server.requests[0]!.receivedAt;
    expect(gap).toBeGreaterThanOrEqual(290);
  });

  it('caps a long Retry-After at maxRetryAfterMs', async () => {
    const { llm } = await setup((_b, i) => (i === 0 ? reply.error(503, { headers: { 'retry-after': '3600' } }) : reply.text('ok')));
    const delays: number[] = [];
    const result = await createChatCompletion(
      llm,
      { messages },
      { policy: { ...fast, maxRetryAfterMs: 20 }, onRetry: (e) => delays.push(e.delayMs) },
    );
    expect(result.attempts).toBe(2);
    expect(delays).toEqual([20]);
  });

  it('retries 500, 502, a hang (per-attempt timeout) and a garbage body, then succeeds', async () => {
    const script: ReplyScript = (_b, i) =>
      [reply.error(500), reply.error(502, { body: 'Bad Gateway' }), reply.hang(), reply.garbage()][i] ?? reply.text('finally');
    const { server, llm } = await setup(script);
    const reasons: string[] = [];
    const result = await createChatCompletion(
      llm,
      { messages },
      { policy: { ...fast, maxAttempts: 5, timeoutMs: 500 }, onRetry: (e) => reasons.push(e.reason) },
    );
    expect(result.completion.choices[0]?.message.content).toBe('finally');
    expect(result.attempts).toBe(5);
    expect(reasons[0]).toBe('HTTP 500: Internal server error');
    expect(reasons[1]).toMatch(/^HTTP 502/);
    expect(reasons[2]).toBe('no reply within 500 ms');
    expect(reasons[3]).toMatch(/^reply body is not JSON/);
    expect(server.requests.map((r) => r.outcome)).toEqual(['error', 'error', 'client_closed', 'garbage', 'text']);
  });

  it('treats a 2xx body without choices, or a text/plain body, as malformed and retries it', async () => {
    const script: ReplyScript = (_b, i) =>
      [
        reply.garbage({ body: '{"id":"x","object":"chat.completion","choices":[]}' }),
        reply.garbage({ contentType: 'text/plain', body: 'hello' }),
      ][i] ?? reply.text('ok');
    const { llm } = await setup(script);
    const reasons: string[] = [];
    const result = await createChatCompletion(llm, { messages }, { policy: fast, onRetry: (e) => reasons.push(e.reason) });
    expect(result.attempts).toBe(3);
    expect(reasons).toEqual(['malformed chat completion: no choices', 'malformed chat completion: text body "hello"']);
  });

  it('gives up after maxAttempts with LlmRetriesExhaustedError naming the endpoint and last failure', async () => {
    const { server, llm } = await setup(() => reply.error(500));
    const error = await createChatCompletion(llm, { messages }, { policy: { ...fast, maxAttempts: 3 } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmRetriesExhaustedError);
    expect((error as LlmRetriesExhaustedError).attempts).toBe(3);
    expect((error as Error).message).toBe(
      `LLM endpoint ${server.baseUrl} failed 3 attempt(s); last failure: HTTP 500: Internal server error`,
    );
    expect(server.requests).toHaveLength(3);
  });

  it('does not retry 401: one request, LlmAuthError naming the endpoint and the refused key', async () => {
    const { server, llm } = await setup(() => reply.error(401));
    const error = await createChatCompletion(llm, { messages }, { policy: fast }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmAuthError);
    expect((error as LlmAuthError).status).toBe(401);
    expect((error as LlmAuthError).failureType).toBe('AuthenticationFailed');
    expect((error as Error).message).toContain(`LLM endpoint ${server.baseUrl} refused the API key (HTTP 401: Incorrect API key provided)`);
    expect(server.requests).toHaveLength(1);
  });

  it('does not retry 403, 404 or 400', async () => {
    const { server, llm } = await setup(
      (_b, i) =>
        [reply.error(403), reply.error(404, { body: { error: { message: 'The model `judge-model` does not exist.' } } }), reply.error(400)][
          i
        ]!,
    );
    await expect(createChatCompletion(llm, { messages }, { policy: fast })).rejects.toBeInstanceOf(LlmAuthError);
    const notFound = await createChatCompletion(llm, { messages }, { policy: fast }).catch((e: unknown) => e);
    expect(notFound).toBeInstanceOf(LlmNotFoundError);
    expect((notFound as Error).message).toMatch(/answered 404 for model "judge-model" \(The model `judge-model` does not exist\.\)/);
    const rejected = await createChatCompletion(llm, { messages }, { policy: fast }).catch((e: unknown) => e);
    expect(rejected).toBeInstanceOf(LlmRequestRejectedError);
    expect((rejected as LlmRequestRejectedError).status).toBe(400);
    expect(server.requests).toHaveLength(3);
  });

  it('retries a refused connection, then gives up', async () => {
    const { server, llm } = await setup(() => reply.text('unused'));
    await server.close();
    const error = await createChatCompletion(llm, { messages }, { policy: { ...fast, maxAttempts: 2 } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmRetriesExhaustedError);
    expect((error as Error).message).toMatch(/failed 2 attempt\(s\); last failure: Connection error/);
  });

  it('cancels a hung call when the caller aborts', async () => {
    const { server, llm } = await setup(() => reply.hang());
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('activity cancelled')), 50);
    await expect(createChatCompletion(llm, { messages }, { policy: fast, signal: controller.signal })).rejects.toThrow(
      'activity cancelled',
    );
    await expect.poll(() => server.inFlight).toBe(0);
    expect(server.requests).toHaveLength(1);
  });
});

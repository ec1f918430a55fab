import OpenAI, { APIConnectionTimeoutError, AuthenticationError, BadRequestError, InternalServerError, RateLimitError } from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { reply, startScriptedOpenAiServer, type ReplyScript, type ScriptedOpenAiServer } from './scripted-openai-server';

let server: ScriptedOpenAiServer | undefined;

afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function start(script: ReplyScript, latencyMs?: number) {
  server = await startScriptedOpenAiServer({ script, ...(latencyMs === undefined ? {} : { latencyMs }) });
  const client = new OpenAI({ baseURL: server.baseUrl, apiKey: 'sk-test', maxRetries: 0, timeout: 5_000 });
  return { server, client };
}

const ask = (client: OpenAI, content = 'hello') =>
  client.chat.completions.create({ model: 'judge-model', messages: [{ role: 'user', content }] });

describe('scripted OpenAI server', () => {
  it('answers a text reply the openai SDK parses, with usage, and records the request', async () => {
    const { server, client } = await start((body, index) => reply.text(`echo ${index}: ${String(body.messages?.[0]?.content)}`));
    const completion = await ask(client, 'abcdefgh');
    expect(completion.object).toBe('chat.completion');
    expect(completion.model).toBe('judge-model');
    expect(completion.choices[0]?.message).toMatchObject({ role: 'assistant', content: 'echo 0: abcdefgh' });
    expect(completion.choices[0]?.finish_reason).toBe('stop');
    expect(completion.usage).toEqual({ prompt_tokens: 2, completion_tokens: 4, total_tokens: 6 });
    expect(server.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]).toMatchObject({ callIndex: 0, path: '/v1/chat/completions', outcome: 'text', status: 200 });
    expect(server.requests[0]?.headers.authorization).toBe('Bearer sk-test');
    expect(server.requests[0]?.body?.model).toBe('judge-model');
    expect(server.usage.total_tokens).toBe(6);
  });

  it('returns tool calls with JSON-encoded arguments and finish_reason tool_calls', async () => {
    const { client } = await start(() =>
      reply.toolCalls([
        { name: 'grep', arguments: { pattern: 'def foo', path: 'src' } },
        { id: 'fixed', name: 'read', arguments: '{"path": "a.py"' },
      ]),
    );
    const completion = await client.chat.completions.create({
      model: 'agent',
      messages: [{ role: 'user', content: 'find foo' }],
      tools: [{ type: 'function', function: { name: 'grep', parameters: { type: 'object' } } }],
    });
    const choice = completion.choices[0];
    expect(choice?.finish_reason).toBe('tool_calls');
    expect(choice?.message.content).toBeNull();
    expect(choice?.message.tool_calls).toEqual([
      { id: 'call_0_0', type: 'function', function: { name: 'grep', arguments: '{"pattern":"def foo","path":"src"}' } },
      { id: 'fixed', type: 'function', function: { name: 'read', arguments: '{"path": "a.py"' } },
    ]);
  });

  it('streams text and tool calls as SSE chunks the SDK can reassemble, with usage on request', async () => {
    const { client } = await start((_body, index) =>
      index === 0
        ? reply.text('streamed answer', { usage: { prompt_tokens: 7, completion_tokens: 3 } })
        : reply.toolCalls([{ name: 'glob', arguments: { pattern: '*.py' } }]),
    );
    const stream = await client.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'x' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: unknown;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe('streamed answer');
    expect(usage).toEqual({ prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 });

    const runner = client.chat.completions.stream({ model: 'm', messages: [{ role: 'user', content: 'y' }] });
    const final = await runner.finalChatCompletion();
    expect(final.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'glob', arguments: '{"pattern":"*.py"}' } });
  });

  it('serves /chat/completions without the /v1 prefix and /v1/models', async () => {
    const { server } = await start(() => reply.text('plain'));
    const client = new OpenAI({ baseURL: server.origin, apiKey: 'k', maxRetries: 0 });
    const completion = await ask(client);
    expect(completion.choices[0]?.message.content).toBe('plain');
    expect(server.requests[0]?.path).toBe('/chat/completions');
    const models = await fetch(`${server.baseUrl}/models`).then((r) => r.json());
    expect(models).toMatchObject({ object: 'list', data: [{ object: 'model' }] });
    const missing = await fetch(`${server.origin}/v1/embeddings`, { method: 'POST', body: '{}' });
    expect(missing.status).toBe(404);
  });

  it('sends scripted HTTP errors that the SDK maps to its typed errors, with headers', async () => {
    const { client } = await start((_body, index) => {
      const scripted = [
        reply.error(429, { headers: { 'retry-after': '2' } }),
        reply.error(500),
        reply.error(401),
        reply.error(400, { body: { error: { message: 'context too long', type: 'invalid_request_error' } } }),
      ][index];
      if (!scripted) throw new Error('script ran out of replies');
      return scripted;
    });
    const rate = await ask(client).catch((e: unknown) => e);
    expect(rate).toBeInstanceOf(RateLimitError);
    expect((rate as RateLimitError).headers.get('retry-after')).toBe('2');
    await expect(ask(client)).rejects.toBeInstanceOf(InternalServerError);
    await expect(ask(client)).rejects.toBeInstanceOf(AuthenticationError);
    await expect(ask(client)).rejects.toThrow(BadRequestError);
    await expect(ask(client)).rejects.toThrow(/script threw: Error: script ran out of replies/);
  });

  it('sends a garbage body that is not JSON', async () => {
    const { server, client } = await start(() => reply.garbage());
    await expect(ask(client)).rejects.toThrow(SyntaxError);
    expect(server.requests[0]?.outcome).toBe('garbage');
  });

  it('hangs until the client times out, then stops counting the request in flight; close() ends hung sockets', async () => {
    const { server, client } = await start(() => reply.hang());
    const started = Date.now();
    await expect(
      client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] }, { timeout: 200 }),
    ).rejects.toBeInstanceOf(APIConnectionTimeoutError);
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    await expect.poll(() => server.inFlight).toBe(0);
    expect(server.requests[0]?.outcome).toBe('client_closed');

    const pending = fetch(`${server.baseUrl}/chat/completions`, { method: 'POST', body: JSON.stringify({ messages: [] }) });
    await expect.poll(() => server.inFlight).toBe(1);
    await server.close();
    await expect(pending).rejects.toThrow();
  });

  it('applies fixed latency and reports the peak number of requests in flight', async () => {
    const { server, client } = await start(() => reply.text('ok'), 150);
    const started = Date.now();
    await Promise.all(Array.from({ length: 5 }, () => ask(client)));
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(145);
    expect(elapsed).toBeLessThan(1_000);
    expect(server.peakInFlight).toBe(5);
    expect(server.inFlight).toBe(0);
    server.resetPeak();
    await ask(client);
    expect(server.peakInFlight).toBe(1);
    expect(server.requests.map((r) => r.callIndex)).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('answers 400 to a body without messages and still records it', async () => {
    const { server } = await start(() => reply.text('never'));
    const response = await fetch(`${server.baseUrl}/chat/completions`, { method: 'POST', body: 'not json' });
    expect(response.status).toBe(400);
    expect(server.requests[0]).toMatchObject({ outcome: 'bad_request', rawBody: 'not json', body: undefined });
  });
});

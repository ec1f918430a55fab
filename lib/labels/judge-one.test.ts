import { afterEach, describe, expect, it } from 'vitest';
import type { JudgeCandidate } from '../../schemas/judge';
import { reply, startScriptedOpenAiServer, type ReplyScript, type ScriptedOpenAiServer } from '../../test/support/scripted-openai-server';
import { createLlmClient } from '../llm/client';
import { LlmAuthError } from '../llm/errors';
import { resolveRetryPolicy } from '../llm/retry';
import { judgeOne, type JudgeCall } from './judge-one';
import { DEFAULT_JUDGE_PROMPT_LIMITS } from './judge-prompt';

const candidate: JudgeCandidate = {
  trajectoryId: 'traj-1',
  instanceId: 'django__django-11099',
  repo: 'django/django',
  path: 'django/contrib/auth/validators.py',
  problemStatement: 'UsernameValidator allows trailing newline in usernames',
  postReasoning: 'The regex ends in $, which also matches before a trailing newline; \\Z is needed.',
  postReasoningTokens: 40,
};

let server: ScriptedOpenAiServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function callWith(script: ReplyScript, extra: Partial<JudgeCall> = {}): Promise<{ call: JudgeCall; requests: number[] }> {
  server = await startScriptedOpenAiServer({ script });
  const requests: number[] = [];
  const call: JudgeCall = {
    client: createLlmClient({ baseUrl: server.baseUrl, model: 'judge-model' }),
    policy: resolveRetryPolicy({ maxAttempts: 3, timeoutMs: 2_000, baseDelayMs: 1, maxDelayMs: 5 }),
    promptLimits: DEFAULT_JUDGE_PROMPT_LIMITS,
    onRequests: (n) => requests.push(n),
    ...extra,
  };
  return { call, requests };
}

describe('judgeOne', () => {
  it('sends one request at temperature 0 and returns the verdict with the answer as reply', async () => {
    const { call, requests } = await callWith(() => reply.text('The regex is here.\n\nVerdict: RELEVANT'));
    const judgement = await judgeOne(candidate, call, new AbortController().signal);
    expect(judgement).toMatchObject({
      trajectoryId: 'traj-1',
      instanceId: 'django__django-11099',
      path: 'django/contrib/auth/validators.py',
      verdict: 'RELEVANT',
      attempts: 1,
      model: 'judge-model',
    });
    expect(judgement.error).toBeUndefined();
    expect(requests).toEqual([1]);
    expect(server!.requests[0]!.body?.temperature).toBe(0);
    expect(server!.requests[0]!.body?.max_tokens).toBeUndefined();
  });

  it('passes max_tokens, and leaves temperature to the server when it is null', async () => {
    const { call } = await callWith(() => reply.text('NOT_RELEVANT'), { temperature: null, maxTokens: 512 });
    expect((await judgeOne(candidate, call, new AbortController().signal)).verdict).toBe('NOT_RELEVANT');
    expect(server!.requests[0]!.body).not.toHaveProperty('temperature');
    expect(server!.requests[0]!.body?.max_tokens).toBe(512);
  });

  it('retries a 500 and counts every request', async () => {
    const { call, requests } = await callWith((_, i) => (i === 0 ? reply.error(500) : reply.text('**NOT_RELEVANT**')));
    const judgement = await judgeOne(candidate, call, new AbortController().signal);
    expect(judgement).toMatchObject({ verdict: 'NOT_RELEVANT', attempts: 2 });
    expect(requests).toEqual([2]);
  });

  it('records a call that fails after every retry as DEFAULTED with the error, and a 400 after one request', async () => {
    const exhausted = await callWith(() => reply.error(503));
    const failed = await judgeOne(candidate, exhausted.call, new AbortController().signal);
    expect(failed).toMatchObject({ verdict: 'DEFAULTED', reply: '', attempts: 3 });
    expect(failed.error).toMatch(/503/);
    expect(exhausted.requests).toEqual([3]);
    await server!.close();

    const rejected = await callWith(() => reply.error(400));
    const bad = await judgeOne(candidate, rejected.call, new AbortController().signal);
    expect(bad).toMatchObject({ verdict: 'DEFAULTED', attempts: 1 });
    expect(bad.error).toMatch(/400/);
    expect(rejected.requests).toEqual([1]);
  });

  it('throws an auth failure and an abort instead of defaulting, still counting the request', async () => {
    const auth = await callWith(() => reply.error(401));
    await expect(judgeOne(candidate, auth.call, new AbortController().signal)).rejects.toBeInstanceOf(LlmAuthError);
    expect(auth.requests).toEqual([1]);
    await server!.close();

    const hung = await callWith(() => reply.hang());
    const controller = new AbortController();
    const pending = judgeOne(candidate, hung.call, controller.signal);
    setTimeout(() => controller.abort(new Error('run stopped')), 50);
    await expect(pending).rejects.toThrow();
    expect(hung.requests).toEqual([1]);
  });
});

import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { JudgeCandidate, Judgement } from '../../schemas/judge';
import { JUDGE_REPLY_MAX_CHARS, JudgementSchema } from '../../schemas/judge';
import {
  reply,
  startScriptedOpenAiServer,
  type ChatRequestBody,
  type ReplyScript,
  type ScriptedOpenAiServer,
} from '../../test/support/scripted-openai-server';
import { readRows } from '../artifacts';
import { LlmAuthError, LlmNotFoundError } from '../llm/errors';
import { goldFilesFromPatch } from '../patch/parse-diff';
import { mineTrajectories } from '../trajectories/mine-trajectories';
import { JudgeEndpointFailingError, judgeCandidates, judgementKey, truncateReply, type JudgeRunOptions } from './judge-run';

// Real candidates: CATM stage 1 over the real OpenHands sample, joined with SWE-bench Verified problem statements.
const dataDir = path.resolve(import.meta.dirname, '../../../shared/data');
let candidates: JudgeCandidate[] = [];
/** problem statement → gold-patch files of its instance, so the scripted judge can answer like an oracle. */
const goldByProblem = new Map<string, Set<string>>();

beforeAll(async () => {
  const instances = new Map<string, { problem: string; gold: Set<string> }>();
  for await (const record of readRows(path.join(dataDir, 'swebench_verified.jsonl'))) {
    if (!('row' in record)) continue;
    const row = record.row as { instance_id: string; problem_statement: string; patch: string };
    instances.set(row.instance_id, { problem: row.problem_statement, gold: new Set(goldFilesFromPatch(row.patch)) });
  }
  const mined = mineTrajectories(readRows(path.join(dataDir, 'openhands_trajectories.sample.jsonl')));
  for await (const c of mined.candidates) {
    const instance = instances.get(c.instanceId);
    if (!instance) continue;
    goldByProblem.set(instance.problem.trim(), instance.gold);
    candidates.push({
      trajectoryId: c.trajectoryId,
      instanceId: c.instanceId,
      repo: c.repo,
      path: c.path,
      problemStatement: instance.problem,
      postReasoning: c.postReasoning,
      postReasoningTokens: c.postReasoningTokens,
    });
  }
  candidates = candidates.slice(0, 40);
  few = candidates.slice(0, 12);
  forty = candidates;
}, 60_000);

let server: ScriptedOpenAiServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

function promptOf(body: ChatRequestBody): { problem: string; file: string; reasoning: string } {
  const user = String(body.messages?.find((m) => m.role === 'user')?.content ?? '');
  const section = (tag: string) => new RegExp(`<${tag}>\\n([\\s\\S]*?)\\n</${tag}>`).exec(user)?.[1] ?? '';
  return { problem: section('task_description'), file: section('file_path'), reasoning: section('agent_reasoning_after_reading_the_file') };
}

const isTestFile = (file: string) => /(^|\/)tests?(\/|_)|_tests?\.py$/.test(file);

/** The oracle judge: gold-patch files are RELEVANT, test files get an unclear reply, the rest NOT_RELEVANT. */
const oracle: ReplyScript = (body) => {
  const { problem, file } = promptOf(body);
  if (goldByProblem.get(problem)?.has(file)) return reply.text('**RELEVANT**');
  if (isTestFile(file)) return reply.text('Hard to say; the test might matter later.');
  return reply.text('The agent moved on.\n\nVerdict: NOT_RELEVANT');
};

function expectedVerdict(c: JudgeCandidate): Judgement['verdict'] {
  if (goldByProblem.get(c.problemStatement.trim())?.has(c.path)) return 'RELEVANT';
  if (isTestFile(c.path)) return 'DEFAULTED';
  return 'NOT_RELEVANT';
}

const fastBackoff = { baseDelayMs: 1, maxDelayMs: 5 };
// The machine is shared and small: most tests use a dozen candidates, the concurrency ones 40.
let few: JudgeCandidate[] = [];
let forty: JudgeCandidate[] = [];

async function run(script: ReplyScript, overrides: Partial<JudgeRunOptions> = {}, latencyMs?: number) {
  server = await startScriptedOpenAiServer({ script, ...(latencyMs === undefined ? {} : { latencyMs }) });
  const judgements: Judgement[] = [];
  const summary = await judgeCandidates({
    candidates: few,
    alreadyJudged: new Set(),
    llm: { baseUrl: server.baseUrl, model: 'judge-model' },
    backoff: fastBackoff,
    onJudgement: (j) => {
      judgements.push(j);
    },
    ...overrides,
  });
  return { server, judgements, summary };
}

/** What identifies a candidate inside a request (the prompt carries no trajectory id). */
const promptKey = (body: ChatRequestBody) => {
  const { file, reasoning } = promptOf(body);
  return `${file}\u0000${reasoning}`;
};
const candidateKey = (c: JudgeCandidate) => `${c.path}\u0000${c.postReasoning.trim()}`;
const judgementOf = (judgements: Judgement[], c: JudgeCandidate) =>
  judgements.find((j) => j.trajectoryId === c.trajectoryId && j.path === c.path);

describe('judgeCandidates', () => {
  it('judges every real candidate once through the HTTP server, verdicts following the replies', async () => {
    let sinkActive = 0;
    let sinkPeak = 0;
    const judgements: Judgement[] = [];
    const { server, summary } = await run(oracle, {
      candidates,
      onJudgement: async (j) => {
        sinkActive += 1;
        sinkPeak = Math.max(sinkPeak, sinkActive);
        await new Promise((resolve) => setTimeout(resolve, 1));
        judgements.push(j);
        sinkActive -= 1;
      },
    });
    expect(candidates.length).toBe(40);
    expect(judgements).toHaveLength(candidates.length);
    expect(server.requests).toHaveLength(candidates.length);
    expect(sinkPeak).toBe(1);
    const expected = new Map(candidates.map((c) => [judgementKey(c.trajectoryId, c.path), expectedVerdict(c)]));
    for (const j of judgements) {
      expect(JudgementSchema.parse(j)).toEqual(j);
      expect(j.verdict).toBe(expected.get(judgementKey(j.trajectoryId, j.path)));
      expect(j).toMatchObject({ attempts: 1, model: 'judge-model' });
      expect(j.error).toBeUndefined();
    }
    const tally = (v: Judgement['verdict']) => [...expected.values()].filter((x) => x === v).length;
    expect(tally('RELEVANT')).toBeGreaterThan(0);
    expect(tally('NOT_RELEVANT')).toBeGreaterThan(0);
    expect(tally('DEFAULTED')).toBeGreaterThan(0);
    expect(summary.counts).toMatchObject({
      candidates: candidates.length,
      resumed: 0,
      relevant: tally('RELEVANT'),
      notRelevant: tally('NOT_RELEVANT'),
      defaulted: tally('DEFAULTED'),
      errors: 0,
      skipped: 0,
      requests: candidates.length,
      inFlight: 0,
    });
    // The prompt carries the candidate's own problem statement, path and post-reasoning.
    const first = candidates[0]!;
    const prompts = server.requests.map((r) => promptOf(r.body!));
    expect(prompts).toContainEqual({ problem: first.problemStatement.trim(), file: first.path, reasoning: first.postReasoning.trim() });
    expect(server.requests[0]?.body).toMatchObject({ model: 'judge-model', temperature: 0 });
  });

  it('retries a 429 after its Retry-After and counts the attempts', async () => {
    const target = candidateKey(few[3]!);
    let limited = false;
    const { server, judgements, summary } = await run((body, index) => {
      if (promptKey(body) === target && !limited) {
        limited = true;
        return reply.error(429, { headers: { 'retry-after': '0.2' } });
      }
      return oracle(body, index, { headers: {}, path: '' });
    });
    const judged = judgementOf(judgements, few[3]!)!;
    expect(judged.attempts).toBe(2);
    expect(judged.verdict).toBe(expectedVerdict(few[3]!));
    expect(judged.latencyMs).toBeGreaterThanOrEqual(195);
    const attempts = server.requests.filter((r) => promptKey(r.body!) === target);
    expect(attempts[1]!.receivedAt - attempts[0]!.receivedAt).toBeGreaterThanOrEqual(195);
    expect(summary.counts.requests).toBe(few.length + 1);
    expect(summary.counts.errors).toBe(0);
  });

  it('retries a 500 and a hung call (per-call timeout), then records the verdict', async () => {
    const flaky = new Map([
      [candidateKey(few[0]!), [reply.error(500)]],
      [candidateKey(few[1]!), [reply.hang(), reply.hang()]],
    ]);
    // A timeout generous enough for a loaded 2-core machine, yet short enough to keep the test quick.
    const { judgements, summary } = await run(
      (body, index) => flaky.get(promptKey(body))?.shift() ?? oracle(body, index, { headers: {}, path: '' }),
      { timeoutMs: 500, concurrency: 2, candidates: few.slice(0, 6) },
    );
    expect(judgementOf(judgements, few[0]!)).toMatchObject({ attempts: 2, verdict: expectedVerdict(few[0]!) });
    const hung = judgementOf(judgements, few[1]!)!;
    expect(hung).toMatchObject({ attempts: 3, verdict: expectedVerdict(few[1]!) });
    expect(hung.latencyMs).toBeGreaterThanOrEqual(1_000);
    expect(summary.counts.errors).toBe(0);
    expect(judgements).toHaveLength(6);
  });

  it('retries a garbage body; one that stays garbage becomes DEFAULTED with an error, the others are unharmed', async () => {
    const healed = candidateKey(few[0]!);
    const broken = candidateKey(few[1]!);
    let healedOnce = false;
    const { judgements, summary, server } = await run(
      (body, index) => {
        const key = promptKey(body);
        if (key === broken) return reply.garbage();
        if (key === healed && !healedOnce) {
          healedOnce = true;
          return reply.garbage();
        }
        return oracle(body, index, { headers: {}, path: '' });
      },
      { maxAttempts: 3 },
    );
    expect(judgementOf(judgements, few[0]!)).toMatchObject({ attempts: 2, verdict: expectedVerdict(few[0]!) });
    const failed = judgementOf(judgements, few[1]!)!;
    expect(failed).toMatchObject({ verdict: 'DEFAULTED', attempts: 3, reply: '' });
    expect(failed.error).toMatch(/failed 3 attempt\(s\); last failure: reply body is not JSON/);
    expect(summary.counts.errors).toBe(1);
    expect(summary.counts.defaulted).toBe(few.filter((c) => candidateKey(c) !== broken && expectedVerdict(c) === 'DEFAULTED').length);
    expect(judgements).toHaveLength(few.length);
    expect(server.requests.filter((r) => promptKey(r.body!) === broken)).toHaveLength(3);
  });

  it('records a 400 for one candidate as DEFAULTED with the error, without retrying it', async () => {
    const rejected = candidateKey(few[2]!);
    const { judgements, summary, server } = await run(
      (body, index) =>
        promptKey(body) === rejected
          ? reply.error(400, { body: { error: { message: "This model's maximum context length is 8192 tokens" } } })
          : oracle(body, index, { headers: {}, path: '' }),
      { candidates: few.slice(0, 6) },
    );
    expect(judgementOf(judgements, few[2]!)).toMatchObject({
      verdict: 'DEFAULTED',
      attempts: 1,
      error: expect.stringContaining("rejected the request (HTTP 400: This model's maximum context length is 8192 tokens)"),
    });
    expect(server.requests.filter((r) => promptKey(r.body!) === rejected)).toHaveLength(1);
    expect(summary.counts).toMatchObject({ errors: 1, requests: 6 });
  });

  it('keeps an unclear or empty reply as DEFAULTED (no error) and stores at most 500 characters of it', async () => {
    const long = `It depends. ${'The agent read the file and then '.repeat(40)}`;
    const { judgements, summary } = await run((_b, i) => (i % 2 === 0 ? reply.text(long) : reply.text(null)), {
      candidates: candidates.slice(0, 4),
      concurrency: 1,
    });
    expect(judgements.map((j) => j.verdict)).toEqual(['DEFAULTED', 'DEFAULTED', 'DEFAULTED', 'DEFAULTED']);
    expect(judgements[0]!.reply).toHaveLength(JUDGE_REPLY_MAX_CHARS);
    expect(judgements[0]!.reply.endsWith('…')).toBe(true);
    expect(judgements[1]!.reply).toBe('');
    expect(summary.counts).toMatchObject({ defaulted: 4, errors: 0 });
  });

  it('aborts on 401 with LlmAuthError after exactly one request, delivering nothing', async () => {
    server = await startScriptedOpenAiServer({ script: () => reply.error(401) });
    const judgements: Judgement[] = [];
    const error = await judgeCandidates({
      candidates,
      alreadyJudged: new Set(),
      llm: { baseUrl: server.baseUrl, model: 'judge-model', apiKey: 'sk-wrong' },
      concurrency: 1,
      backoff: fastBackoff,
      onJudgement: (j) => void judgements.push(j),
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmAuthError);
    expect((error as Error).message).toContain(`LLM endpoint ${server.baseUrl} refused the API key (HTTP 401`);
    expect(server.requests).toHaveLength(1);
    expect(judgements).toHaveLength(0);
  });

  it('stops all 16 lanes on 401 without retrying any of them', async () => {
    server = await startScriptedOpenAiServer({ script: () => reply.error(401), latencyMs: 30 });
    const error = await judgeCandidates({
      candidates,
      alreadyJudged: new Set(),
      llm: { baseUrl: server.baseUrl, model: 'judge-model' },
      backoff: fastBackoff,
      onJudgement: () => undefined,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmAuthError);
    expect(server.requests.length).toBeLessThanOrEqual(16);
    const files = server.requests.map((r) => promptKey(r.body!));
    expect(new Set(files).size).toBe(files.length);
  });

  it('aborts on 404 (unknown model) instead of defaulting every file', async () => {
    const error = await run(() => reply.error(404, { body: { error: { message: 'The model `judge-model` does not exist.' } } }), {
      concurrency: 2,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmNotFoundError);
    expect(server!.requests.length).toBeLessThanOrEqual(2);
  });

  it('stops with JudgeEndpointFailingError when the endpoint fails many candidates in a row', async () => {
    server = await startScriptedOpenAiServer({ script: () => reply.error(503) });
    const judgements: Judgement[] = [];
    const error = await judgeCandidates({
      candidates,
      alreadyJudged: new Set(),
      llm: { baseUrl: server.baseUrl, model: 'judge-model' },
      concurrency: 1,
      maxAttempts: 2,
      maxConsecutiveErrors: 3,
      backoff: fastBackoff,
      onJudgement: (j) => void judgements.push(j),
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JudgeEndpointFailingError);
    expect((error as Error).message).toMatch(/failed 3 candidates in a row after all retries.*HTTP 503/);
    expect(judgements).toHaveLength(3);
    expect(judgements.every((j) => j.verdict === 'DEFAULTED' && j.error)).toBe(true);
    expect(server.requests).toHaveLength(6);
  });

  it('never has more than 16 calls in flight, and reaches 16 when there is enough work', async () => {
    const { server, summary } = await run(oracle, { candidates: forty }, 80);
    expect(server.peakInFlight).toBe(16);
    expect(summary.counts.requests).toBe(forty.length);
    const { server: narrow } = await run(oracle, { concurrency: 4, candidates: candidates.slice(0, 12) }, 20);
    expect(narrow.peakInFlight).toBe(4);
  });

  it('skips already-judged keys without a request, and a killed run resumes without losing or repeating work', async () => {
    const already = new Set(forty.slice(0, 20).map((c) => judgementKey(c.trajectoryId, c.path)));
    const skipping = await run(oracle, { candidates: forty, alreadyJudged: already });
    expect(skipping.summary.counts.resumed).toBe(20);
    expect(skipping.server.requests).toHaveLength(forty.length - 20);
    expect(skipping.judgements.some((j) => already.has(judgementKey(j.trajectoryId, j.path)))).toBe(false);
    await skipping.server.close();

    // Kill after 10 judgements are durable; resume from what the sink holds.
    const durable: Judgement[] = [];
    const kill = new AbortController();
    const first = await run(
      oracle,
      {
        candidates: forty,
        signal: kill.signal,
        onJudgement: (j) => {
          durable.push(j);
          if (durable.length === 10) kill.abort(new Error('worker killed'));
        },
      },
      20,
    ).catch((e: unknown) => e);
    expect(first).toEqual(new Error('worker killed'));
    const firstRequests = server!.requests.length;
    expect(durable.length).toBeGreaterThanOrEqual(10);
    expect(durable.length).toBeLessThan(forty.length);
    await server!.close();

    const resumed = await run(oracle, {
      candidates: forty,
      alreadyJudged: new Set(durable.map((j) => judgementKey(j.trajectoryId, j.path))),
    });
    expect(resumed.summary.counts.resumed).toBe(durable.length);
    expect(resumed.server.requests).toHaveLength(forty.length - durable.length);
    const keys = [...durable, ...resumed.judgements].map((j) => judgementKey(j.trajectoryId, j.path));
    expect(new Set(keys).size).toBe(keys.length);
    expect(new Set(keys)).toEqual(new Set(forty.map((c) => judgementKey(c.trajectoryId, c.path))));
    // Work lost to the kill is at most the calls that were in flight.
    expect(firstRequests - durable.length).toBeLessThanOrEqual(16);
  });

  it('in judge: none mode keeps every candidate as SKIPPED and sends nothing', async () => {
    server = await startScriptedOpenAiServer({ script: () => reply.text('RELEVANT') });
    const judgements: Judgement[] = [];
    const summary = await judgeCandidates({ candidates, alreadyJudged: new Set(), llm: null, onJudgement: (j) => void judgements.push(j) });
    expect(server.requests).toHaveLength(0);
    expect(judgements).toHaveLength(candidates.length);
    expect(judgements.every((j) => j.verdict === 'SKIPPED' && j.model === null && j.attempts === 0 && j.reply === '')).toBe(true);
    expect(summary.counts).toMatchObject({ skipped: candidates.length, requests: 0, relevant: 0 });
    expect(summary.model).toBeNull();
  });

  it('counts invalid and duplicate candidates without judging them, from an async stream', async () => {
    const [a, b] = candidates;
    async function* stream() {
      yield a!;
      yield { ...a!, path: '' };
      yield a!;
      yield b!;
    }
    const progress: number[] = [];
    const { judgements, summary, server } = await run(oracle, {
      candidates: stream() as AsyncIterable<JudgeCandidate>,
      onProgress: (c) => progress.push(c.candidates),
    });
    expect(judgements.map((j) => j.path)).toEqual(expect.arrayContaining([a!.path, b!.path]));
    expect(server.requests).toHaveLength(2);
    expect(summary.counts).toMatchObject({ candidates: 4, invalid: 1, duplicates: 1 });
    expect(summary.invalidExamples[0]).toMatch(/^candidate #2: .*path/);
    expect(progress.at(-1)).toBe(4);
  });

  it('aborts the run when the sink or the progress hook fails, and rethrows its error', async () => {
    const error = await run(oracle, {
      candidates: forty,
      onJudgement: () => {
        throw new Error('disk full');
      },
    }).catch((e: unknown) => e);
    expect(error).toEqual(new Error('disk full'));
    expect(server!.requests.length).toBeLessThan(forty.length);
    await server!.close();

    const progressError = await run(oracle, {
      onProgress: () => {
        throw new Error('heartbeat failed');
      },
    }).catch((e: unknown) => e);
    expect(progressError).toEqual(new Error('heartbeat failed'));
  });
});

describe('truncateReply', () => {
  it('leaves short replies alone and never splits a surrogate pair', () => {
    expect(truncateReply('RELEVANT')).toBe('RELEVANT');
    expect(truncateReply(`${'a'.repeat(3)}😀x`, 5)).toBe('aaa…');
    expect(truncateReply('abcdef', 5)).toBe('abcd…');
  });
});

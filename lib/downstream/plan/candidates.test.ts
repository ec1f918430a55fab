import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUGS, buildCalcFixture, type CalcFixture } from '../../../test/integration/downstream-fixture';
import { reply, startScriptedOpenAiServer, type ScriptedOpenAiServer } from '../../../test/support/scripted-openai-server';
import { readParquetObjects } from '../../artifacts';
import type { AgentRetrieverConfig } from '../../../schemas/evaluation';
import { candidatesDir, retrieveCandidates } from './candidates';

/**
 * The files a served policy finds for the downstream instances (source `agent`): the scripted endpoint stands
 * in for the policy server, each instance runs in a throwaway checkout of the acme/calc fixture, and the rows
 * name the served checkpoint. A second call after losing the Parquet asks the endpoint nothing again.
 */
const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-candidates-'));
const runDir = path.join(work, 'runs', 'r');
let fixture: CalcFixture;
let policy: ScriptedOpenAiServer;
const KEY = 'CODEGREP_CANDIDATES_TEST_KEY';
const processKeyBefore = process.env[KEY];

beforeAll(async () => {
  process.env[KEY] = 'key-of-the-process';
  fixture = buildCalcFixture(work);
  // One tool call, then an answer naming the buggy file of the issue it was given.
  policy = await startScriptedOpenAiServer({
    script: (body) => {
      const messages = body.messages ?? [];
      const issue = JSON.stringify(messages.filter((m) => m.role === 'user'));
      const bug = BUGS.find((b) => issue.includes(JSON.stringify(b.marker).slice(1, -1)));
      if (!messages.some((m) => m.role === 'tool')) return reply.toolCalls([{ name: 'glob', arguments: { pattern: 'calc/*.py' } }]);
      return reply.text(`<answer>{"files": ["${bug?.file ?? 'none.py'}"], "line_ranges": []}</answer>`);
    },
  });
}, 60_000);

afterAll(async () => {
  if (processKeyBefore === undefined) delete process.env[KEY];
  else process.env[KEY] = processKeyBefore;
  await policy?.close();
  rmSync(work, { recursive: true, force: true });
});

const retriever = (): AgentRetrieverConfig => ({
  name: 'trained-agent',
  kind: 'agent',
  apiKeyEnv: KEY,
  baseUrl: policy.baseUrl,
  model: 'r/step-00000002',
  answerFormat: 'codegrep',
  limits: { maxTurns: 3 },
  concurrency: 2,
  timeoutMs: 10_000,
  policy: 'trained',
  served: {
    runId: 'r',
    step: 2,
    adapterSha256: 'ab'.repeat(32),
    baseModel: '/models/tiny',
    model: 'r/step-00000002',
    baseUrl: policy.baseUrl,
    backend: 'hf',
    requestLog: '/dev/null',
  },
});

const retrieve = () =>
  retrieveCandidates({
    runDir,
    configuration: 'trained agent',
    retriever: retriever(),
    instancesFile: fixture.instancesPath,
    checkouts: { repoSource: { kind: 'mirror-dir', dir: fixture.mirrors }, cacheDir: path.join(work, 'cache') },
    isolation: 'filter-only',
    signal: new AbortController().signal,
    // The worker's environment, not this process's (which has another value under the name: beforeAll).
    env: { [KEY]: 'key-the-worker-read' },
  });

describe('retrieveCandidates', () => {
  it('asks the served policy about every instance in a checkout of its commit, and writes rows that name the checkpoint', async () => {
    const retrieved = await retrieve();
    expect(retrieved).toMatchObject({ instances: 3, failed: 0, reused: 0 });
    const rows = await readParquetObjects(retrieved.predictions.uri);
    expect(rows.map((r) => [r.instanceId, r.files])).toEqual(BUGS.map((b) => [b.id, [b.file]]));
    for (const row of rows)
      expect(row).toMatchObject({
        retriever: 'trained-agent',
        kind: 'agent',
        turns: 2,
        error: null,
        servedModel: 'r/step-00000002',
        baseModel: '/models/tiny',
        checkpointStep: 2,
        adapterSha256: 'ab'.repeat(32),
      });
    // Each episode's tools answered from a checkout of the instance's commit, and every checkout is gone.
    expect(policy.requests).toHaveLength(6);
    // The policy's key is the one of the environment the run was given.
    expect(new Set(policy.requests.map((r) => r.headers.authorization))).toEqual(new Set(['Bearer key-the-worker-read']));
    const toolReplies = policy.requests.flatMap((r) => (r.body?.messages ?? []).filter((m) => m.role === 'tool'));
    expect(toolReplies).toHaveLength(3);
    for (const message of toolReplies) expect(JSON.stringify(message.content)).toContain('calc/units.py');
    const dir = path.dirname(retrieved.predictions.uri);
    expect(dir.startsWith(candidatesDir(runDir, 'trained agent', ''))).toBe(true);
    expect(existsSync(path.join(dir, 'checkouts'))).toBe(false);
    expect(readdirSync(path.join(dir, 'instances'))).toHaveLength(3);
  });

  it('is a cache hit when called again, and resumes from the finished instances when the Parquet is lost', async () => {
    const asked = policy.requests.length;
    const again = await retrieve();
    expect(again.reused).toBe(3);
    rmSync(again.predictions.uri);
    const resumed = await retrieve();
    expect(resumed).toMatchObject({ instances: 3, reused: 3 });
    expect(resumed.predictions.sha256).toBe(again.predictions.sha256);
    expect(policy.requests).toHaveLength(asked);
  });

  it('refuses a retriever whose policy was not served', async () => {
    await expect(
      retrieveCandidates({
        runDir,
        configuration: 'x',
        retriever: { ...retriever(), served: undefined },
        instancesFile: fixture.instancesPath,
        checkouts: { repoSource: { kind: 'mirror-dir', dir: fixture.mirrors }, cacheDir: path.join(work, 'cache') },
        signal: new AbortController().signal,
        env: {},
      }),
    ).rejects.toThrow(/no served policy/);
  });
});

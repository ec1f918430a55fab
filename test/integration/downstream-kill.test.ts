import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readParquetObjects } from '../../lib/artifacts';
import { DownstreamRunRecordSchema, type DownstreamResult } from '../../schemas/downstream';
import { startScriptedOpenAiServer, type ScriptedOpenAiServer } from '../support/scripted-openai-server';
import { killWorkerProcess, spawnWorkerProcess, testClient, uniqueTaskQueue } from '../support/temporal';
import { agentScript, buildCalcFixture, calcDownstreamInput, pairKey, pythonWithPytest, type CalcFixture } from './downstream-fixture';

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-downstream-kill-'));
const dataDir = path.join(work, 'runs');
const workers: ChildProcess[] = [];
const taskQueue = uniqueTaskQueue('downstream-kill');
let fixture: CalcFixture;
let python: string;
let server: ScriptedOpenAiServer;

beforeAll(async () => {
  fixture = buildCalcFixture(work);
  python = pythonWithPytest();
  // A slow endpoint: every model call takes 400 ms, so a kill always lands in the middle of the study.
  server = await startScriptedOpenAiServer({ script: agentScript(400) });
});
afterAll(async () => {
  for (const worker of workers) await killWorkerProcess(worker);
  await server?.close();
  rmSync(work, { recursive: true, force: true });
});

/** Model calls each (injection, instance) conversation needs with the scripted agent. */
const ROUNDS: Record<string, number> = {
  'none/acme__calc-1': 2,
  'none/acme__calc-2': 2,
  'none/acme__calc-3': 3,
  'injected/acme__calc-1': 2,
  'injected/acme__calc-2': 2,
  'injected/acme__calc-3': 2,
};
const keyOf = (configuration: string, instanceId: string) => `${configuration === 'baseline' ? 'none' : 'injected'}/${instanceId}`;

function config(runId: string): Record<string, unknown> {
  return calcDownstreamInput({ runId, dataDir, fixture, baseUrl: server.baseUrl, python, concurrency: 1, heartbeatMs: 3_000 });
}

/** (configuration, instance) pairs with a finished run record on disk. */
function finishedPairs(runId: string): string[] {
  const root = path.join(dataDir, runId, 'downstream', 'runs');
  if (!existsSync(root)) return [];
  return readdirSync(root).flatMap((configuration) =>
    readdirSync(path.join(root, configuration))
      .filter((f) => f.endsWith('.json.manifest.json'))
      .map((f) => keyOf(configuration, f.slice(0, -'.json.manifest.json'.length))),
  );
}

function requestsPerPair(since = 0): Map<string, number> {
  const counts = new Map<string, number>();
  for (const request of server.requests) {
    if (request.receivedAt < since) continue;
    const key = pairKey(request.body);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

async function waitFor(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('downstream stage survives a killed worker and a restarted workflow', () => {
  it('resumes on a new worker without running a finished (configuration, instance) pair again', async () => {
    const { client, close } = await testClient();
    try {
      workers.push(await spawnWorkerProcess(taskQueue));
      const runId = 'ds-kill';
      const handle = await client.workflow.start('downstream', { taskQueue, workflowId: `${runId}/downstream`, args: [config(runId)] });

      // Kill while the third pair (baseline on instance 2) is talking to the model, two pairs being done.
      await waitFor(
        () => finishedPairs(runId).length >= 2 && (requestsPerPair().get('none/acme__calc-2') ?? 0) >= 1,
        120_000,
        'two finished runs and a third one under way',
      );
      await killWorkerProcess(workers[0]!);
      const killedAt = Date.now();
      const finishedAtKill = finishedPairs(runId);
      const beforeKill = requestsPerPair();
      expect(finishedAtKill.length).toBeGreaterThanOrEqual(2);
      expect(finishedAtKill.length).toBeLessThan(6);

      workers.push(await spawnWorkerProcess(taskQueue));
      const result = (await handle.result()) as DownstreamResult;
      expect(result).toMatchObject({ pairs: 6, ran: 6, reusedBeforeStart: 0 });
      const rows = await readParquetObjects(result.runs.uri);
      expect(rows.map((r) => `${r.configuration}/${r.instanceId}:${r.resolved}`)).toEqual([
        'baseline/acme__calc-1:false',
        'oracle/acme__calc-1:true',
        'baseline/acme__calc-2:false',
        'oracle/acme__calc-2:true',
        'baseline/acme__calc-3:true',
        'oracle/acme__calc-3:true',
      ]);
      expect(result.tableValues.rows[1]!.vsBaseline!.mcnemar).toEqual({ b: 0, c: 2, pValue: 0.5 });

      // Finished pairs: not one model call after the kill, and exactly one conversation in all.
      const afterKill = requestsPerPair(killedAt);
      const total = requestsPerPair();
      for (const key of finishedAtKill) {
        expect(afterKill.get(key) ?? 0, key).toBe(0);
        expect(total.get(key), key).toBe(ROUNDS[key]);
      }
      // Every other pair ran one whole conversation after the kill (the one cut short restarted from round 1).
      const unfinished = Object.keys(ROUNDS).filter((key) => !finishedAtKill.includes(key));
      for (const key of unfinished) expect(afterKill.get(key), key).toBe(ROUNDS[key]);
      expect([...afterKill.values()].reduce((a, b) => a + b, 0)).toBe(unfinished.reduce((sum, key) => sum + ROUNDS[key]!, 0));
      expect(beforeKill.get('none/acme__calc-2')).toBeGreaterThanOrEqual(1);

      // The run cut short was redone by a later attempt of its activity; the finished ones by their first.
      const record = (configuration: string, instance: string) =>
        DownstreamRunRecordSchema.parse(
          JSON.parse(readFileSync(path.join(dataDir, runId, 'downstream', 'runs', configuration, `${instance}.json`), 'utf8')),
        );
      if (!finishedAtKill.includes('none/acme__calc-2')) expect(record('baseline', 'acme__calc-2').attempt).toBeGreaterThan(1);
      expect(record('baseline', 'acme__calc-1').attempt).toBe(1);
      // No checkout of the killed attempt is left behind.
      const checkouts = path.join(dataDir, runId, 'downstream', 'checkouts');
      expect(readdirSync(checkouts, { recursive: true }).filter((entry) => String(entry).split(path.sep).length > 2)).toEqual([]);
    } finally {
      await close();
    }
  });

  it('a terminated workflow started again runs only the pairs without a record', async () => {
    const { client, close } = await testClient();
    try {
      // The worker the first test started after the kill serves this one too (a worker process takes seconds to start).
      if (workers.every((w) => w.exitCode !== null || w.signalCode !== null)) workers.push(await spawnWorkerProcess(taskQueue));
      const runId = 'ds-restart';
      const workflowId = `${runId}/downstream`;
      const first = await client.workflow.start('downstream', { taskQueue, workflowId, args: [config(runId)] });
      await waitFor(() => finishedPairs(runId).length >= 3, 120_000, 'three finished runs');
      await first.terminate('test: restart the stage');
      const terminatedAt = Date.now();
      const finishedAtStop = finishedPairs(runId);

      const second = await client.workflow.start('downstream', { taskQueue, workflowId, args: [config(runId)] });
      const result = (await second.result()) as DownstreamResult;
      expect(result.pairs).toBe(6);
      expect(result.reusedBeforeStart).toBeGreaterThanOrEqual(finishedAtStop.length);
      expect(result.ran + result.reusedBeforeStart).toBe(6);
      const afterStop = requestsPerPair(terminatedAt);
      for (const key of finishedAtStop) expect(afterStop.get(key) ?? 0, key).toBe(0);
      expect((await readParquetObjects(result.runs.uri)).filter((r) => r.resolved)).toHaveLength(4);
    } finally {
      await close();
    }
  });
});

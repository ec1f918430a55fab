import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { readParquetObjects } from '../../lib/artifacts';
import type { PipelineResult } from '../../workflows/pipeline';
import { reply, startScriptedOpenAiServer } from '../support/scripted-openai-server';
import { sharedData } from '../support/repo-root';
import { killWorkerProcess, spawnWorkerProcess, testClient, uniqueTaskQueue } from '../support/temporal';

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-kill-'));
const workers: ChildProcess[] = [];
afterAll(async () => {
  for (const worker of workers) await killWorkerProcess(worker);
  rmSync(work, { recursive: true, force: true });
});

function shardLines(dir: string): number {
  let lines = 0;
  for (const shardDir of readdirSync(dir)) {
    for (const file of readdirSync(path.join(dir, shardDir))) {
      lines += readFileSync(path.join(dir, shardDir, file), 'utf8')
        .split('\n')
        .filter((l) => l.trim() !== '').length;
    }
  }
  return lines;
}

async function waitFor(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('judge stage survives a killed worker', () => {
  it('resumes on a new worker: every candidate judged exactly once, nothing persisted is asked again', async () => {
    const llm = await startScriptedOpenAiServer({ latencyMs: 700, script: () => reply.text('RELEVANT') });
    const taskQueue = uniqueTaskQueue('kill-it');
    const { client, close } = await testClient();
    try {
      workers.push(await spawnWorkerProcess(taskQueue));
      const runId = 'it-kill';
      const handle = await client.workflow.start('pipeline', {
        taskQueue,
        workflowId: `${runId}/pipeline`,
        args: [
          {
            runId,
            dataDir: work,
            stages: ['catm'],
            inputs: {
              trajectories: path.join(sharedData, 'openhands_trajectories.sample.jsonl'),
              instances: path.join(sharedData, 'swebench_verified.jsonl'),
            },
            judge: { mode: 'llm', baseUrl: llm.baseUrl, model: 'slow-judge', concurrency: 16 },
            // A short heartbeat timeout so the retry on the new worker starts within seconds.
            temporal: { activityTimeouts: { judge: { heartbeatMs: 3_000 } } },
          },
        ],
      });

      const shardRoot = path.join(work, runId, 'catm', 'judge-shards');
      await waitFor(
        () => {
          try {
            return shardLines(shardRoot) >= 20;
          } catch {
            return false;
          }
        },
        120_000,
        'the first 20 judgements',
      );
      await killWorkerProcess(workers[0]!);
      const killedAt = Date.now();
      const persistedAtKill = shardLines(shardRoot);

      workers.push(await spawnWorkerProcess(taskQueue));
      const result = (await handle.result()) as PipelineResult;
      const catm = result.catm!;
      const candidates = catm.candidates.rows;
      expect(persistedAtKill).toBeGreaterThan(0);
      expect(persistedAtKill).toBeLessThan(candidates);

      const judgements = await readParquetObjects(catm.judgements.uri);
      expect(judgements.length).toBe(candidates);
      const keys = judgements.map((j) => `${j.trajectoryId}\u0000${j.path}`);
      expect(new Set(keys).size).toBe(candidates);
      expect(judgements.every((j) => j.verdict === 'RELEVANT')).toBe(true);
      expect(catm.summaryValues.judge.resumed).toBe(persistedAtKill);

      // Only what was not persisted at the kill is asked again: no judgement repeated, none lost.
      const askedAfterKill = llm.requests.filter((r) => r.receivedAt > killedAt).length;
      expect(askedAfterKill).toBe(candidates - persistedAtKill);
    } finally {
      await close();
      await llm.close();
    }
  });
});

import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readParquetObjects } from '../../lib/artifacts';
import type { EvaluationResult } from '../../schemas/evaluation';
import type { PipelineResult } from '../../workflows/pipeline';
import { buildFixtureRepo } from '../support/fixture-repos';
import { reply, startScriptedOpenAiServer, type ChatRequestBody } from '../support/scripted-openai-server';
import { killWorkerProcess, spawnWorkerProcess, testClient, uniqueTaskQueue } from '../support/temporal';

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-eval-kill-'));
const workers: ChildProcess[] = [];
afterAll(async () => {
  for (const worker of workers) await killWorkerProcess(worker);
  rmSync(work, { recursive: true, force: true });
});

async function waitFor(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

type Message = { role: string; content?: unknown };
const issueOf = (body: ChatRequestBody | undefined) =>
  String(((body?.messages ?? []) as Message[]).find((m) => m.role === 'user')?.content ?? '');

describe('evaluation shards survive a killed worker', () => {
  it('resumes on a new worker: finished shards are kept as they are, only the killed and the unstarted shards ask the endpoint', async () => {
    const mirrors = path.join(work, 'mirrors');
    const fixture = buildFixtureRepo(work, mirrors);
    // Four instances (two per commit) so two shards can finish before the kill and two remain.
    const instances = [
      ...fixture,
      { ...fixture[0]!, instance_id: 'acme__widgets-3', problem_statement: 'Issue three: Gear sizes are off.' },
      { ...fixture[1]!, instance_id: 'acme__widgets-4', problem_statement: 'Issue four: belts are too short.' },
    ];
    const instancesPath = path.join(work, 'instances.jsonl');
    writeFileSync(instancesPath, instances.map((i) => JSON.stringify(i)).join('\n') + '\n');
    writeFileSync(path.join(work, 'trajectories.jsonl'), '');

    // Every episode: a grep, then an answer. Each reply takes 1.5 s, so a shard (one instance) takes ~3 s.
    const llm = await startScriptedOpenAiServer({
      latencyMs: 1_500,
      script: (body) =>
        (body.messages as Message[]).some((m) => m.role === 'assistant')
          ? reply.text('<answer>{"files": ["widgets/gears.py"]}</answer>')
          : reply.toolCalls([{ name: 'grep', arguments: { pattern: 'def ' } }]),
    });
    const taskQueue = uniqueTaskQueue('eval-kill');
    const runId = 'eval-kill';
    const config = {
      runId,
      dataDir: path.join(work, 'runs'),
      inputs: { trajectories: path.join(work, 'trajectories.jsonl'), instances: instancesPath },
      environment: { repoSource: { kind: 'mirror-dir', dir: mirrors } },
      evaluation: {
        retrievers: [{ name: 'slow-agent', kind: 'agent', baseUrl: llm.baseUrl, model: 'slow', answerFormat: 'codegrep' }],
        shardSize: 1,
        // One shard at a time, so "finished" and "not started" are well defined at the kill.
        maxConcurrentShards: 1,
        bootstrap: { samples: 100 },
      },
      // A short heartbeat timeout so the retry on the new worker starts within seconds.
      temporal: { activityTimeouts: { evaluation: { heartbeatMs: 3_000 } } },
    };
    const { client, close } = await testClient();
    try {
      workers.push(await spawnWorkerProcess(taskQueue));
      const environment: PipelineResult = await client.workflow.execute('pipeline', {
        taskQueue,
        workflowId: `${runId}/pipeline`,
        args: [{ ...config, stages: ['catm', 'environment'] }],
      });
      expect(environment.outcomes.map((o) => o.status)).toEqual(['completed', 'completed']);

      const handle = await client.workflow.start('evaluation', { taskQueue, workflowId: `${runId}/evaluation`, args: [config] });
      const shardsRoot = path.join(work, 'runs', runId, 'evaluation', 'shards');
      const finished = () =>
        existsSync(shardsRoot)
          ? (readdirSync(shardsRoot, { recursive: true }) as string[])
              .filter((f) => f.endsWith('.parquet.manifest.json'))
              .map((f) => path.join(shardsRoot, f))
              .sort()
          : [];
      // Kill while the third shard's first request is in flight.
      await waitFor(() => finished().length === 2 && llm.inFlight > 0, 120_000, 'two finished shards and a third one asking the endpoint');
      await killWorkerProcess(workers[0]!);
      const killedAt = Date.now();
      const keptShards = finished();
      const keptMtimes = keptShards.map((f) => statSync(f.replace(/\.manifest\.json$/, '')).mtimeMs);
      const askedBeforeKill = llm.requests.length;
      const issuesBeforeKill = new Set(llm.requests.map((r) => issueOf(r.body)));
      expect(keptShards).toHaveLength(2);
      expect(issuesBeforeKill.size).toBe(3); // shards 1 and 2 done, shard 3 started

      workers.push(await spawnWorkerProcess(taskQueue));
      const result: EvaluationResult = await handle.result();
      expect(result.shards).toEqual({ total: 4, cached: 0, computed: 4, failed: 0 });

      // The finished shards were not written again.
      expect(keptShards.map((f) => statSync(f.replace(/\.manifest\.json$/, '')).mtimeMs)).toEqual(keptMtimes);
      // After the kill the endpoint saw only the killed shard (again, from its first turn) and the fourth one:
      // two requests each, none for the instances of the finished shards.
      const afterKill = llm.requests.filter((r) => r.receivedAt > killedAt);
      expect(afterKill).toHaveLength(4);
      const issuesAfterKill = new Set(afterKill.map((r) => issueOf(r.body)));
      expect(issuesAfterKill.size).toBe(2);
      const finishedIssues = [...issuesBeforeKill].filter((issue) => !issuesAfterKill.has(issue));
      expect(finishedIssues).toHaveLength(2);
      expect(llm.requests.length).toBe(askedBeforeKill + 4);

      const metrics = await readParquetObjects(result.metrics.uri);
      expect(metrics.map((m) => m.instanceId).sort()).toEqual(['acme__widgets-1', 'acme__widgets-2', 'acme__widgets-3', 'acme__widgets-4']);
      expect(metrics.every((m) => m.turns === 2 && m.failed === false)).toBe(true);
      console.log(
        `kill and resume: ${askedBeforeKill} requests before the kill, ${afterKill.length} after; resumed in ${Date.now() - killedAt} ms`,
      );
    } finally {
      await close();
      await llm.close();
    }
  });
});

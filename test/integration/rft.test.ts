import { execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readParquetObjects } from '../../lib/artifacts';
import { readRftRows, sftLayout } from '../../lib/rft';
import type { RftResult } from '../../schemas/rft';
import type { PipelineResult } from '../../workflows/pipeline';
import { generateComponentRepos } from '../../lib/learn-task/component-repos';
import { componentTeacher } from '../support/grep-teacher-script';
import { spawnGpuWorkerProcess } from '../support/gpu-worker';
import { repoRoot } from '../support/repo-root';
import { startScriptedOpenAiServer } from '../support/scripted-openai-server';
import { killWorkerProcess, spawnWorkerProcess, testClient, uniqueTaskQueue } from '../support/temporal';

/**
 * The rft stage on the real dev server (CodeScout §4.1's warm start): the scripted teacher makes real grep calls
 * on generated component repositories (real git, real worktrees) and answers the path it found; the kept rollouts
 * are fine-tuned on by the real trainer.sft on a tiny random Qwen3-shaped model, on the CPU. The CPU worker is
 * killed in the middle of sampling and the GPU worker in the middle of fine-tuning; the stage completes with
 * each instance sampled once (finished ones never asked again) and each SFT step recorded once.
 */

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-rft-it-'));
const workers: ChildProcess[] = [];
const runDir = path.join(work, 'runs', 'rft-it');
afterAll(async () => {
  for (const worker of workers) await killWorkerProcess(worker);
  const pidFile = sftLayout(runDir).pidFile;
  if (existsSync(pidFile)) {
    try {
      process.kill(-(JSON.parse(readFileSync(pidFile, 'utf8')) as { pid: number }).pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  rmSync(work, { recursive: true, force: true });
});

async function waitFor(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const logLines = (dir: string) =>
  existsSync(dir)
    ? (readdirSync(dir, { recursive: true }) as string[])
        .filter((f) => f.endsWith('.jsonl'))
        .flatMap((f) => readFileSync(path.join(dir, f), 'utf8').split('\n').filter(Boolean))
    : [];

const stepLines = () =>
  logLines(sftLayout(runDir).attempts)
    .map((l) => {
      try {
        return JSON.parse(l) as { event?: string; step?: number };
      } catch {
        return {};
      }
    })
    .filter((e) => e.event === 'step');

describe('the rft stage survives killed workers', () => {
  it('samples each instance once and records each SFT step once across a CPU-worker kill mid-sampling and a GPU-worker kill mid-fine-tune', async () => {
    const mirrors = path.join(work, 'mirrors');
    // Two repositories of four instances: six sampled for RFT (three shards of two), two left for RL.
    const instances = await generateComponentRepos({ root: work, mirrorDir: mirrors, seed: 7, repos: 2, instancesPerRepo: 4 });
    const instancesPath = path.join(work, 'instances.jsonl');
    writeFileSync(instancesPath, instances.map((i) => JSON.stringify(i)).join('\n') + '\n');
    writeFileSync(path.join(work, 'trajectories.jsonl'), '');
    const modelDir = path.join(work, 'tiny-model');
    execFileSync(path.join(repoRoot, '.venv/bin/python'), ['-m', 'trainer.random_model', '--out', modelDir, '--shape', 'tiny'], {
      cwd: repoRoot,
      stdio: 'ignore',
    });
    const rftInstances = instances.slice(0, 6).map((i) => i.instance_id);
    // One reply every 400 ms: a shard (two instances, two turns each, one at a time) takes ~1.6 s.
    const teacher = await startScriptedOpenAiServer({ latencyMs: 400, script: componentTeacher });
    const cpuQueue = uniqueTaskQueue('rft-cpu');
    const gpuQueue = uniqueTaskQueue('rft-gpu');
    const gpuEnv = { OMP_NUM_THREADS: '1', MKL_NUM_THREADS: '1', TOKENIZERS_PARALLELISM: 'false', CODEGREP_SHUTDOWN_GRACE_MS: '2000' };
    const config = {
      runId: 'rft-it',
      dataDir: path.join(work, 'runs'),
      stages: ['catm', 'environment', 'rft'],
      inputs: { trajectories: path.join(work, 'trajectories.jsonl'), instances: instancesPath },
      environment: { repoSource: { kind: 'mirror-dir', dir: mirrors } },
      training: { modelDir, steps: 1, recipe: 'v3', gpuTaskQueue: gpuQueue, limits: { maxTurns: 2 } },
      rft: {
        instances: rftInstances,
        teacher: { baseUrl: teacher.baseUrl, model: 'scripted-teacher' },
        shardSize: 2,
        maxConcurrentShards: 1,
        concurrency: 1,
        sft: { globalBatchSize: 1, epochs: 3, saveEvery: 1, finetune: 'full', stopGraceMs: 20_000 },
      },
      // Short heartbeat timeouts, so the retries on the new workers start within seconds.
      temporal: { activityTimeouts: { evaluation: { heartbeatMs: 3_000 }, training: { heartbeatMs: 4_000 } } },
    };
    const { client, close } = await testClient();
    try {
      workers.push(await spawnWorkerProcess(cpuQueue));
      workers.push(await spawnGpuWorkerProcess(gpuQueue, gpuEnv));
      const handle = await client.workflow.start('pipeline', { taskQueue: cpuQueue, workflowId: 'rft-it/pipeline', args: [config] });

      // Kill the CPU worker while the second shard has one rollout logged and the next one is asking the teacher.
      const shardLogs = path.join(runDir, 'rft', 'shards');
      await waitFor(() => logLines(shardLogs).length === 3 && teacher.inFlight > 0, 120_000, 'three logged rollouts and a fourth asking');
      await killWorkerProcess(workers[0]!);
      const killedAt = Date.now();
      const loggedAtKill = logLines(shardLogs).map((l) => (JSON.parse(l) as { instanceId: string }).instanceId);
      expect(new Set(loggedAtKill).size).toBe(3);
      workers.push(await spawnWorkerProcess(cpuQueue));

      // Kill the GPU worker once trainer.sft took its first step.
      await waitFor(() => stepLines().length >= 1, 180_000, 'the first SFT step');
      await killWorkerProcess(workers[1]!);
      workers.push(await spawnGpuWorkerProcess(gpuQueue, gpuEnv));

      const result = (await handle.result()) as PipelineResult;
      expect(result.outcomes.map((o) => [o.stage, o.status])).toEqual([
        ['catm', 'completed'],
        ['environment', 'completed'],
        ['rft', 'completed'],
      ]);
      const rft = result.rft as RftResult;

      // Sampling: every RFT instance once in the artifact, all kept (the teacher is right), and the instances that
      // were finished at the kill were never asked again (their issue text reached the teacher only before it).
      const rows = await readRftRows(rft.trajectories.uri);
      expect(rows.map((r) => r.instanceId).sort()).toEqual([...rftInstances].sort());
      expect(rows.every((r) => r.kept && r.fileF1 === 1 && r.toolCalls === 1 && r.error === null)).toBe(true);
      expect(rft).toMatchObject({ sampled: 6, kept: 6, failed: 0, teacher: 'scripted-teacher' });
      const issueOf = (id: string) => instances.find((i) => i.instance_id === id)!.problem_statement;
      const askedAfterKill = teacher.requests
        .filter((r) => r.receivedAt > killedAt)
        .map((r) => String((r.body?.messages as { role: string; content: string }[]).find((m) => m.role === 'user')?.content));
      for (const id of loggedAtKill) expect(askedAfterKill).not.toContain(issueOf(id));
      // Two requests per instance, and at most the killed rollout's two again.
      expect(teacher.requests.length).toBeLessThanOrEqual(2 * 6 + 2);
      // Each trajectory holds the teacher's real grep call and the tool's real output naming the gold file.
      for (const row of rows) {
        const messages = JSON.parse(row.messages) as { role: string; content: string; tool_calls?: { function: { name: string } }[] }[];
        expect(messages.find((m) => m.role === 'assistant')?.tool_calls?.[0]?.function.name).toBe('grep');
        const gold = instances.find((i) => i.instance_id === row.instanceId)!.gold_file;
        expect(messages.find((m) => m.role === 'tool')?.content).toContain(`${gold}:`);
        expect(row.inputIds!.length).toBe(row.policyMask!.length);
        expect(row.policyMask!.some((m) => m === 1)).toBe(true);
      }

      // Fine-tuning: two attempts at least, each optimizer step once across every attempt's log, all recorded.
      const attempts = readdirSync(sftLayout(runDir).attempts).filter((f) => f.endsWith('.stdout.jsonl'));
      const events = attempts.map((f) =>
        readFileSync(path.join(sftLayout(runDir).attempts, f), 'utf8')
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as { event: string; step?: number })
          .map((e) => `${e.event}:${e.step}`)
          .join(' '),
      );
      console.log(
        `rft: ${teacher.requests.length} teacher requests; SFT attempts: ${events.join(' | ')}; ${Math.round((Date.now() - killedAt) / 1000)} s after the first kill`,
      );
      const steps = stepLines().map((e) => e.step!);
      expect(new Set(steps).size).toBe(steps.length);
      expect(readdirSync(sftLayout(runDir).attempts).filter((f) => f.endsWith('.stdout.jsonl')).length).toBeGreaterThanOrEqual(2);
      const metrics = await readParquetObjects(path.join(runDir, 'rft', 'sft', 'metrics.parquet'));
      expect(metrics.map((m) => m.step)).toEqual(Array.from({ length: rft.sftSteps }, (_, i) => i + 1));
      expect(rft.sftSteps).toBe(18); // 6 examples × 3 epochs at batch 1
      expect(existsSync(path.join(rft.checkpoint, 'COMPLETE'))).toBe(true);

      // The RL samples are the run's samples without the RFT instances.
      const trainingSamples = await readParquetObjects(rft.trainingSamples.uri);
      expect(trainingSamples.map((s) => s.instanceId).sort()).toEqual(
        instances
          .slice(6)
          .map((i) => i.instance_id)
          .sort(),
      );
    } finally {
      await close();
      await teacher.close();
    }
  });
});

import { execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { readParquetObjects } from '../../lib/artifacts';
import { openArtifactStore } from '../../lib/artifacts/store';
import { newestFenceEntry, storedCheckpointSteps } from '../../lib/store-sync';
import type { TrainSegmentResult } from '../../schemas/training/activity-io';
import type { PipelineResult } from '../../workflows/pipeline';
import { buildFixtureRepo } from '../support/fixture-repos';
import { spawnGpuWorkerProcess } from '../support/gpu-worker';
import { repoRoot } from '../support/repo-root';
import { startSeaweedS3, type SeaweedS3 } from '../support/seaweedfs';
import { killWorkerProcess, startWorker, testClient, uniqueTaskQueue } from '../support/temporal';

/**
 * README "Deployment: several machines", end to end: the pipeline catm → environment → training (smoke: a tiny random model on the CPU)
 * → evaluation with nodes that share nothing but Temporal and the store (a real SeaweedFS):
 *
 * - node A: the CPU worker (workflows and every CPU activity, in this process), data dir A;
 * - node B: a "GPU" worker process (workers/gpu.ts) with its own data dir B, killed (with its trainer) mid-segment
 *   once a checkpoint has reached the store;
 * - node C: another "GPU" worker process with a fresh data dir C, which resumes the segment from the store.
 */
const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-shared-nothing-'));
const node = (name: string) => ({ data: path.join(work, name, 'data'), cache: path.join(work, name, 'cache') });
const [A, B, C] = [node('node-a'), node('node-b'), node('node-c')];
const mirrors = path.join(work, 'mirrors');
const modelDir = path.join(work, 'tiny-model');
const cpuQueue = uniqueTaskQueue('sn-cpu');
const gpuQueue = uniqueTaskQueue('sn-gpu');
const gpuLog = path.join(work, 'gpu-workers.log');
const gpuEnv = { OMP_NUM_THREADS: '1', MKL_NUM_THREADS: '1', TOKENIZERS_PARALLELISM: 'false', CODEGREP_SHUTDOWN_GRACE_MS: '2000' };
const BUCKET = 'codegrep-runs';
/** CODEGREP_TEST_FILE_STORE=1 runs the same test against a file:// store, without SeaweedFS (a quicker dry run). */
const fileStore = process.env.CODEGREP_TEST_FILE_STORE === '1';
const STORE = fileStore ? `file://${path.join(work, 'store')}` : `s3://${BUCKET}/shared`;
const runId = 'sn-run';
const gpuWorkers: ChildProcess[] = [];
let weed: SeaweedS3;
let stopCpuWorker: () => Promise<void>;
let client: Client;
let closeClient: () => Promise<void>;
let instancesPath: string;
let trajectoriesPath: string;

beforeAll(async () => {
  if (!fileStore) {
    weed = await startSeaweedS3(path.join(work, 'weed'));
    await weed.createBucket(BUCKET);
  }
  // Node A (this process) reaches the store through the standard AWS variables, with its own node-local cache.
  Object.assign(process.env, fileStore ? {} : weed.env, { CODEGREP_ARTIFACT_CACHE: A.cache });
  const instances = buildFixtureRepo(work, mirrors);
  instancesPath = path.join(work, 'instances.jsonl');
  trajectoriesPath = path.join(work, 'trajectories.jsonl');
  writeFileSync(instancesPath, instances.map((i) => JSON.stringify(i)).join('\n') + '\n');
  writeFileSync(trajectoriesPath, '');
  execFileSync(path.join(repoRoot, '.venv/bin/python'), ['-m', 'trainer.random_model', '--out', modelDir, '--shape', 'tiny'], {
    cwd: repoRoot,
    stdio: 'ignore',
  });
  for (const n of [A, B, C]) mkdirSync(n.data, { recursive: true });
  ({ stop: stopCpuWorker } = await startWorker(cpuQueue));
  ({ client, close: closeClient } = await testClient());
}, 300_000);

function killTrainerOf(dataDir: string): void {
  const pidFile = path.join(dataDir, runId, 'training', 'trainer.pid.json');
  if (!existsSync(pidFile)) return;
  try {
    process.kill(-(JSON.parse(readFileSync(pidFile, 'utf8')) as { pid: number }).pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

afterAll(async () => {
  for (const worker of gpuWorkers) await killWorkerProcess(worker);
  for (const n of [B, C]) killTrainerOf(n.data);
  await closeClient?.();
  await stopCpuWorker?.();
  await weed?.stop();
  rmSync(work, { recursive: true, force: true });
});

async function waitFor<T>(probe: () => Promise<T | null | undefined | false>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => null);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const segmentDir = (dataDir: string) => path.join(dataDir, runId, 'training', 'segments', 'segment-0001');

function stdoutEvents(dataDir: string, attempt: number): { event: string; step?: number }[] {
  const file = path.join(segmentDir(dataDir), `attempt-${String(attempt).padStart(2, '0')}.stdout.jsonl`);
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { event: string; step?: number });
}

/** Every file below `dir`, relative, sorted. */
function tree(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)))
    .sort();
}

describe('shared-nothing: CPU and GPU nodes share only Temporal and the store (README "Deployment: several machines")', () => {
  it('runs catm → environment → training → evaluation; a GPU node killed mid-segment is replaced by one with a fresh data dir that resumes from the store', async () => {
    onTestFailed(() => {
      const tail = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').slice(-4000) : '(none)');
      console.error(`--- gpu workers ---\n${tail(gpuLog)}`);
      for (const n of [B, C])
        for (const f of tree(segmentDir(n.data)).filter((f) => f.endsWith('.stderr.log')))
          console.error(`--- ${n.data} ${f} ---\n${tail(path.join(segmentDir(n.data), f))}`);
    });
    const started = Date.now();
    const timings: Record<string, number> = {};
    const store = openArtifactStore(STORE);
    gpuWorkers.push(
      await spawnGpuWorkerProcess(gpuQueue, { ...gpuEnv, CODEGREP_DATA_DIR: B.data, CODEGREP_ARTIFACT_CACHE: B.cache }, gpuLog),
    );
    timings.gpuWorkerB = Date.now() - started;

    const handle = await client.workflow.start('pipeline', {
      taskQueue: cpuQueue,
      workflowId: `${runId}/pipeline`,
      args: [
        {
          runId,
          dataDir: A.data,
          store: STORE,
          stages: ['catm', 'environment', 'training', 'evaluation'],
          inputs: { trajectories: trajectoriesPath, instances: instancesPath },
          environment: { repoSource: { kind: 'mirror-dir', dir: mirrors } },
          // Short heartbeats: a killed GPU worker is noticed within seconds.
          temporal: { activityTimeouts: { training: { heartbeatMs: 4_000 } } },
          training: {
            modelDir,
            smokeRun: true,
            steps: 6,
            segmentSteps: 6,
            groupSize: 2,
            batchSize: 1,
            checkpointEvery: 1,
            keepCheckpoints: 20,
            limits: { maxTurns: 2, maxNewTokens: 16, maxNewTokensPerTurn: 8, maxSeqLen: 4000 },
            lora: { r: 4, alpha: 8 },
            lr: 1e-3,
            warmupRatio: 0,
            trainer: { generator: 'hf', micro_batch_tokens: 8192 },
            gpuTaskQueue: gpuQueue,
            stopGraceMs: 20_000,
            progressEveryMs: 300,
          },
        },
      ],
    });

    // Node B trains until a checkpoint past step 1 is committed to the store (its marker is the commit record).
    await waitFor(
      async () => (await storedCheckpointSteps(store, runId)).some((s) => s >= 2),
      400_000,
      'a checkpoint of step >= 2 in the store',
    );
    timings.firstCheckpointsPushed = Date.now() - started;
    // The node dies: its worker and its trainer (a dead machine leaves neither running).
    await killWorkerProcess(gpuWorkers.shift()!);
    killTrainerOf(B.data);
    const inStore = await storedCheckpointSteps(store, runId);
    const stepsOnB = stdoutEvents(B.data, 1)
      .filter((e) => e.event === 'step')
      .map((e) => e.step!);
    gpuWorkers.push(
      await spawnGpuWorkerProcess(gpuQueue, { ...gpuEnv, CODEGREP_DATA_DIR: C.data, CODEGREP_ARTIFACT_CACHE: C.cache }, gpuLog),
    );
    timings.killedAndReplaced = Date.now() - started;

    const result = (await handle.result()) as PipelineResult;
    timings.pipelineDone = Date.now() - started;
    console.log(
      `shared-nothing timings (ms since start): ${JSON.stringify(timings)}; store checkpoints at the kill: ${inStore.join(',')}; steps node B logged: ${stepsOnB.join(',')}`,
    );
    expect(result.outcomes).toEqual(
      ['catm', 'environment', 'training', 'evaluation'].map((stage) => ({ stage, status: 'completed', reason: null })),
    );
    expect(result.training!.step).toBe(6);
    expect(result.training!.report.missingSteps).toEqual([]);
    expect((await readParquetObjects(result.training!.report.metrics.uri)).map((r) => r.step)).toEqual(range(1, 6));
    expect(result.training!.checkpoint).toBe(`${STORE}/${runId}/training/trainer/checkpoints/step-00000006/`);

    // The segment ran twice: on B (attempt 1, killed) and on C (attempt 2), which resumed from the store's newest checkpoint.
    const history = await client.workflow.getHandle(`${runId}/training`).fetchHistory();
    const segments = (history.events ?? [])
      .map((e) => e.activityTaskCompletedEventAttributes?.result?.payloads?.[0]?.data)
      .filter((d): d is Uint8Array => d !== undefined && d !== null)
      .map((d) => JSON.parse(Buffer.from(d).toString('utf8')) as Partial<TrainSegmentResult>)
      .filter((r) => r.resumedFrom !== undefined);
    expect(segments).toHaveLength(1);
    const segment = segments[0]!;
    const resumedAt = Math.max(...inStore);
    expect(resumedAt).toBeGreaterThanOrEqual(2);
    expect(segment).toMatchObject({ attempt: 2, step: 6, resumedFrom: resumedAt, stoppedBy: 'budget' });
    expect(segment.metrics!.uri).toBe(`${STORE}/${runId}/training/metrics/segment-0001.parquet`);
    // C's trainer resumed at that step and did only the steps after it.
    expect(stdoutEvents(C.data, 2).find((e) => e.event === 'resumed')?.step).toBe(resumedAt);
    expect(
      stdoutEvents(C.data, 2)
        .filter((e) => e.event === 'step')
        .map((e) => e.step),
    ).toEqual(range(resumedAt + 1, 6));
    // B's log, pulled from the store: every step up to the checkpoint C resumed from (a line B wrote after its last push may be missing).
    const pulled = stdoutEvents(C.data, 1)
      .filter((e) => e.event === 'step')
      .map((e) => e.step!);
    expect(pulled).toEqual(stepsOnB.slice(0, pulled.length));
    expect(pulled.slice(0, resumedAt)).toEqual(range(1, resumedAt));

    // Each step recorded exactly once; the steps done before the kill come from B's pushed logs (attempt 1).
    const rows = await readParquetObjects(segment.metrics!.uri);
    expect(rows.map((r) => r.step)).toEqual(range(1, 6));
    expect(rows.map((r) => r.attempt)).toEqual(range(1, 6).map((step) => (step <= resumedAt ? 1 : 2)));

    // Nothing was shared: the GPU nodes have no CPU stage artifacts, made their own worktrees, and node A has no checkpoint.
    const samples = result.environment!.samples;
    for (const n of [B, C]) {
      expect(readdirSync(n.data).sort()).toEqual(['repos', runId, 'worktrees']);
      expect(readdirSync(path.join(n.data, runId))).toEqual(['training']);
      expect(readdirSync(path.join(n.data, 'worktrees', 'acme__widgets'))).toHaveLength(2);
      expect(tree(path.join(n.data, runId, 'training', 'trainer', 'checkpoints')).length).toBeGreaterThan(0);
    }
    const configOnC = JSON.parse(readFileSync(path.join(segmentDir(C.data), 'attempt-02.config.json'), 'utf8')) as { output_dir: string };
    expect(configOnC.output_dir).toBe(path.join(C.data, runId, 'training', 'trainer'));
    expect(samples.uri.startsWith(A.data)).toBe(true);
    expect(readdirSync(path.join(A.data, runId)).sort()).toEqual(['catm', 'environment', 'evaluation', 'training']);
    expect(existsSync(path.join(A.data, runId, 'training', 'trainer', 'checkpoints'))).toBe(false);
    expect(tree(A.data).some((f) => f.includes('checkpoints'))).toBe(false);
    // The store holds the samples (published before training), the checkpoints and the segment's logs.
    const keys = (await store.list(`${runId}/`)).map((o) => o.key);
    expect(keys).toContain(`${runId}/environment/samples.parquet`);
    expect(keys).toContain(`${runId}/environment/samples.parquet.manifest.json`);
    expect(keys).toContain(`${runId}/training/checkpoint-markers/step-00000006.json`);
    // Logs went up as appended parts (each push only the new lines); both attempts' stdout is there.
    for (const attempt of ['01', '02'])
      expect(
        keys.filter((k) => k.startsWith(`${runId}/training/segments/segment-0001/logs/attempt-${attempt}.stdout.jsonl/part-`)).length,
      ).toBeGreaterThan(0);
    // The run lease: B's attempt 1 took it, then C's attempt 2, which holds it now; every marker C wrote names C's generation.
    const lease = await newestFenceEntry(store, runId);
    expect(lease!.holder).toMatchObject({ segment: 1, attempt: 2 });
    const marker6 = JSON.parse((await store.getBytes(`${runId}/training/checkpoint-markers/step-00000006.json`))!.toString('utf8')) as {
      extra: { generation: number };
    };
    expect(marker6.extra.generation).toBe(lease!.generation);
  }, 900_000);
});

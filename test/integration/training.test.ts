import { execFile, execFileSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { readParquetObjects } from '../../lib/artifacts';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import type { WorkflowProgress } from '../../schemas/progress';
import type { TrainingResult, TrainingStatus } from '../../schemas/training/workflow';
import type { PipelineResult } from '../../workflows/pipeline';
import { buildFixtureRepo } from '../support/fixture-repos';
import { spawnGpuWorkerProcess } from '../support/gpu-worker';
import { repoRoot } from '../support/repo-root';
import { killWorkerProcess, startWorker, temporalAddress, testClient, uniqueTaskQueue } from '../support/temporal';
import { historyCounts, type HistoryCounts } from '../support/history';
import { workflowsPath } from '../../workers/cpu';

/**
 * The training stage on the real dev server: the CPU worker (workflows) in this process, the GPU worker
 * (`workers/gpu.ts`) as a separate process running the real trainer on the CPU with a tiny randomly
 * initialised Qwen3-shaped model (a smoke run: it cannot learn anything), against the environment server on
 * the real fixture repository's worktrees. Kept CPU-cheap: group 2, one prompt per step, 2 turns of 8 tokens.
 */

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-training-it-'));
const mirrors = path.join(work, 'mirrors');
const modelDir = path.join(work, 'tiny-model');
const cpuQueue = uniqueTaskQueue('train-cpu');
const gpuQueue = uniqueTaskQueue('train-gpu');
const gpuLog = path.join(work, 'gpu-worker.log');
const gpuEnv = { OMP_NUM_THREADS: '1', MKL_NUM_THREADS: '1', TOKENIZERS_PARALLELISM: 'false', CODEGREP_SHUTDOWN_GRACE_MS: '2000' };
const gpuWorkers: ChildProcess[] = [];
let stopCpuWorker: () => Promise<void>;
let client: Client;
let closeClient: () => Promise<void>;
let samples: ArtifactRef;

beforeAll(async () => {
  const instances = buildFixtureRepo(work, mirrors);
  const instancesPath = path.join(work, 'instances.jsonl');
  const trajectoriesPath = path.join(work, 'trajectories.jsonl');
  writeFileSync(instancesPath, instances.map((i) => JSON.stringify(i)).join('\n') + '\n');
  writeFileSync(trajectoriesPath, '');
  execFileSync(path.join(repoRoot, '.venv/bin/python'), ['-m', 'trainer.random_model', '--out', modelDir, '--shape', 'tiny'], {
    cwd: repoRoot,
    stdio: 'ignore',
  });
  ({ stop: stopCpuWorker } = await startWorker(cpuQueue));
  ({ client, close: closeClient } = await testClient());
  // The earlier stages for real: CATM samples, then worktrees and ground truth.
  const pipeline = (await client.workflow.execute('pipeline', {
    taskQueue: cpuQueue,
    workflowId: 'train-it-env/pipeline',
    args: [
      {
        runId: 'train-it-env',
        dataDir: path.join(work, 'runs'),
        stages: ['catm', 'environment'],
        inputs: { trajectories: trajectoriesPath, instances: instancesPath },
        environment: { repoSource: { kind: 'mirror-dir', dir: mirrors } },
      },
    ],
  })) as PipelineResult;
  samples = pipeline.environment!.samples;
  gpuWorkers.push(await spawnGpuWorkerProcess(gpuQueue, gpuEnv, gpuLog));
});

afterAll(async () => {
  for (const worker of gpuWorkers) await killWorkerProcess(worker);
  // A trainer orphaned by a killed worker runs in its own process group: stop any that is left.
  for (const run of existsSync(path.join(work, 'runs')) ? readdirSync(path.join(work, 'runs')) : []) {
    const pidFile = path.join(work, 'runs', run, 'training', 'trainer.pid.json');
    if (existsSync(pidFile)) {
      try {
        process.kill(-(JSON.parse(readFileSync(pidFile, 'utf8')) as { pid: number }).pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  await closeClient?.();
  await stopCpuWorker?.();
  rmSync(work, { recursive: true, force: true });
});

function trainingInput(runId: string, training: Record<string, unknown>) {
  return {
    runId,
    dataDir: path.join(work, 'runs'),
    stages: ['training'],
    inputs: { trajectories: path.join(work, 'trajectories.jsonl'), instances: path.join(work, 'instances.jsonl') },
    artifacts: { samples },
    // Short heartbeats: a killed GPU worker is noticed within seconds.
    temporal: { activityTimeouts: { training: { heartbeatMs: 4_000 } } },
    training: {
      modelDir,
      smokeRun: true,
      recipe: 'v3',
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
      ...training,
    },
  };
}

async function waitFor<T>(probe: () => Promise<T | null | undefined | false>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => null);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const status = (handle: WorkflowHandle) => handle.query<TrainingStatus>('trainingStatus');
/** "Several hundred steps" with progress every 2 ms (README "History bounds"): one-turn episodes, about a second a step on a busy core. */
const LONG_RUN_STEPS = Number(process.env.CODEGREP_HISTORY_TEST_STEPS ?? 200);
const runDir = (runId: string) => path.join(work, 'runs', runId);

async function metricSteps(result: TrainingResult): Promise<number[]> {
  return (await readParquetObjects(result.report.metrics.uri)).map((row) => row.step as number);
}

/** Steps recorded in a segment's metrics Parquet files. */
async function segmentSteps(runId: string): Promise<Record<string, number[]>> {
  const dir = path.join(runDir(runId), 'training', 'metrics');
  const out: Record<string, number[]> = {};
  for (const name of readdirSync(dir)
    .filter((n) => n.endsWith('.parquet'))
    .sort()) {
    out[name] = (await readParquetObjects(path.join(dir, name))).map((row) => row.step as number);
  }
  return out;
}

function stdoutEvents(runId: string, segment: number, attempt: number): { event: string; step?: number }[] {
  const file = path.join(
    runDir(runId),
    'training',
    'segments',
    `segment-${String(segment).padStart(4, '0')}`,
    `attempt-${String(attempt).padStart(2, '0')}.stdout.jsonl`,
  );
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { event: string; step?: number });
}

/** The real `codegrep` command against the test server. */
function codegrep(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', path.join(repoRoot, 'cli/main.ts'), ...args],
      { cwd: repoRoot, env: { ...process.env, CODEGREP_TEMPORAL_ADDRESS: temporalAddress() }, timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** On failure, show what the GPU worker and the trainers said. */
function explainFailure(runId: string): void {
  onTestFailed(() => {
    const tail = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').slice(-4000) : '(none)');
    const segments = path.join(runDir(runId), 'training', 'segments');
    const logs = existsSync(segments)
      ? readdirSync(segments).flatMap((s) =>
          readdirSync(path.join(segments, s))
            .filter((f) => f.endsWith('.stderr.log'))
            .map((f) => path.join(segments, s, f)),
        )
      : [];
    console.error(`--- gpu worker log ---\n${tail(gpuLog)}`);
    for (const log of logs) console.error(`--- ${log} ---\n${tail(log)}`);
  });
}

describe('training on the real dev server with the GPU worker on CPU', () => {
  it("a pipeline's history does not grow with the training steps; the training workflow gets at most 2 progress signals per step (history bounds)", async () => {
    const histories: Record<number, { pipeline: HistoryCounts; training: HistoryCounts }> = {};
    const [fewSteps, manySteps] = [3, LONG_RUN_STEPS];
    for (const steps of [fewSteps, manySteps]) {
      const runId = `train-it-history-${steps}`;
      explainFailure(runId);
      // The pipeline runs only its training stage: it reads the environment stage's samples from its run folder.
      cpSync(path.join(runDir('train-it-env'), 'environment'), path.join(runDir(runId), 'environment'), { recursive: true });
      const { artifacts: _samples, ...input } = trainingInput(runId, {
        steps,
        segmentSteps: steps,
        checkpointEvery: steps,
        progressEveryMs: 2,
        limits: { maxTurns: 1, maxNewTokens: 8, maxNewTokensPerTurn: 8, maxSeqLen: 4000 },
      });
      const result = (await client.workflow.execute('pipeline', {
        taskQueue: cpuQueue,
        workflowId: `${runId}/pipeline`,
        args: [input],
      })) as PipelineResult;
      expect(result.outcomes).toEqual([{ stage: 'training', status: 'completed', reason: null }]);
      expect(result.training!.step).toBe(steps);
      histories[steps] = {
        pipeline: await historyCounts(client, `${runId}/pipeline`),
        training: await historyCounts(client, `${runId}/training`),
      };
      const shown = await client.workflow.getHandle(`${runId}/training`).query<WorkflowProgress>('progress');
      expect(shown.stages.training!.progress).toMatchObject({ done: steps, total: steps, unit: 'steps' });
    }
    console.log(`history events: ${JSON.stringify(histories)}`);
    const few = histories[fewSteps]!;
    const many = histories[manySteps]!;
    expect(many.pipeline.signals).toEqual({});
    expect(many.pipeline.commandEvents).toBe(few.pipeline.commandEvents);
    for (const h of [few.pipeline, few.training, many.pipeline, many.training])
      expect(h.workflowTaskEvents).toBeLessThanOrEqual(3 * h.commandEvents);
    // The bound of workflows/training.ts: at most 2 trainingProgress signals per step, nothing else signals.
    expect(Object.keys(many.training.signals).filter((name) => name !== 'trainingProgress')).toEqual([]);
    expect(many.training.signals.trainingProgress ?? 0).toBeGreaterThan(0);
    expect(many.training.signals.trainingProgress ?? 0).toBeLessThanOrEqual(2 * manySteps);
    expect(many.training.commandEvents).toBeLessThanOrEqual(few.training.commandEvents + 2 * (manySteps - fewSteps));
  }, 900_000);

  it('survives a stopped and a killed GPU worker: each retry resumes from the newest checkpoint, and each step is recorded once', async () => {
    const runId = 'train-it-kill';
    const lastStep = 10;
    explainFailure(runId);
    const handle = await client.workflow.start('training', {
      taskQueue: cpuQueue,
      workflowId: `${runId}/training`,
      // 10 steps leave room after both interruptions on a fast machine (with 6, the first attempt once reached step 5).
      args: [trainingInput(runId, { steps: lastStep, segmentSteps: lastStep })],
    });
    const steps = (attempt: number) =>
      stdoutEvents(runId, 1, attempt)
        .filter((e) => e.event === 'step')
        .map((e) => e.step!);

    // 1. A graceful stop (SIGTERM to the worker, as on a node drain): after shutdownGraceTime the segment is
    //    cancelled, its trainer checkpoints and exits, and the attempt fails so that another worker retries it.
    await waitFor(async () => steps(1).length > 0, 200_000, 'a step of the first attempt');
    const stopping = gpuWorkers.shift()!;
    const stopped = new Promise((resolve) => stopping.once('exit', resolve));
    stopping.kill('SIGTERM');
    await stopped;
    const first = stdoutEvents(runId, 1, 1);
    expect(first[first.length - 1]).toMatchObject({ event: 'stopped' });
    const stoppedAt = first[first.length - 1]!.step!;
    expect(existsSync(path.join(runDir(runId), 'training', 'trainer.pid.json'))).toBe(false);
    gpuWorkers.push(await spawnGpuWorkerProcess(gpuQueue, gpuEnv, gpuLog));

    // 2. A crash (SIGKILL to the worker): the trainer it orphaned is reaped by the next attempt.
    await waitFor(async () => steps(2).length > 0, 200_000, 'a step of the second attempt');
    await killWorkerProcess(gpuWorkers.shift()!);
    const killedAt = Math.max(...steps(2));
    gpuWorkers.push(await spawnGpuWorkerProcess(gpuQueue, gpuEnv, gpuLog));

    const result = (await handle.result()) as TrainingResult;
    expect(result.step).toBe(lastStep);
    expect(result.budget).toBe(lastStep);
    expect(result.stoppedEarly).toBe(false);
    expect(await metricSteps(result)).toEqual(range(1, lastStep));
    expect(result.report.missingSteps).toEqual([]);
    expect(await segmentSteps(runId)).toEqual({ 'segment-0001.parquet': range(1, lastStep) });

    // Each attempt started from the newest checkpoint the previous one left, never from scratch.
    const resumedAt = (attempt: number) => stdoutEvents(runId, 1, attempt).find((e) => e.event === 'resumed')?.step;
    expect(resumedAt(2)).toBe(stoppedAt);
    expect(steps(2)[0]).toBe(stoppedAt + 1);
    if (stdoutEvents(runId, 1, 3).length > 0) {
      expect(resumedAt(3)).toBeGreaterThanOrEqual(killedAt);
      expect(steps(3)).toEqual(range(resumedAt(3)! + 1, lastStep));
    } else {
      // The trainer the killed worker orphaned checkpointed the last step before the retry reaped it (the
      // machine's speed decides that race): the retry found every step done and started no trainer. Each step is
      // still recorded once (above), from the orphan's log.
      expect(Math.max(...steps(2))).toBe(lastStep);
    }
    expect(stdoutEvents(runId, 1, 4)).toEqual([]);
    expect(existsSync(path.join(runDir(runId), 'training', 'trainer.pid.json'))).toBe(false);
    const report = readFileSync(result.report.html, 'utf8');
    expect(report).toContain('SMOKE RUN');
    expect(report).toContain('<svg');
    expect(result.report.plots.map((p) => path.basename(p))).toEqual([
      'reward.svg',
      'kl.svg',
      'turns.svg',
      'completion-length.svg',
      'grad-norm.svg',
      'clipping-ratio.svg',
    ]);
  });

  it('pause stops the trainer at a checkpoint, the budget update is validated, resume trains exactly to the new budget (through the CLI)', async () => {
    const runId = 'train-it-pause';
    explainFailure(runId);
    const handle = await client.workflow.start('training', {
      taskQueue: cpuQueue,
      workflowId: `${runId}/training`,
      // One segment per workflow run: the second segment runs in a continue-as-new run that carries the state. A
      // budget far beyond what runs before the pause (the CLI calls below take seconds each; a quiet machine once ran
      // all of 20 steps before the pause came).
      args: [trainingInput(runId, { steps: 200, segmentSteps: 200, maxSegmentsPerRun: 1 })],
    });
    await waitFor(async () => (await status(handle)).step >= 2, 200_000, 'step 2');
    const refused = await codegrep('training', 'budget', runId, '--steps', '1');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/budget refused: the step budget 1 is below the current step \d+/);
    expect((await codegrep('training', 'budget', runId)).stderr).toContain('codegrep training budget needs --steps N');

    const pause = await codegrep('training', 'pause', runId);
    expect(pause.stdout).toContain(`codegrep: pause sent to ${runId}/training`);
    const paused = await waitFor(
      async () => {
        const s = await status(handle);
        return s.state === 'paused' && !s.segmentRunning ? s : null;
      },
      120_000,
      'the paused state with no segment running',
    );
    expect(paused.checkpointStep).toBe(paused.step);
    expect(existsSync(path.join(runDir(runId), 'training', 'trainer.pid.json'))).toBe(false);
    await new Promise((r) => setTimeout(r, 3_000));
    expect((await status(handle)).step).toBe(paused.step);
    const shown = await codegrep('training', 'status', runId);
    expect(shown.stdout).toContain(`${runId}/training: RUNNING`);
    expect(shown.stdout).toContain(`steps       ${paused.step} / 200`);
    expect(shown.stdout).toContain('state       paused — SMOKE RUN');

    const budget = await codegrep('training', 'budget', runId, '--steps', String(paused.step + 1));
    expect(budget.code).toBe(0);
    expect(budget.stdout).toContain(`step budget set to ${paused.step + 1}`);
    expect((await codegrep('training', 'resume', runId)).code).toBe(0);
    const result = (await handle.result()) as TrainingResult;
    expect(result.step).toBe(paused.step + 1);
    expect(result.budget).toBe(paused.step + 1);
    expect(result.stoppedEarly).toBe(false);
    expect(result.segments).toBe(2);
    expect((await client.workflow.getHandle(`${runId}/training`).describe()).runId).not.toBe(handle.firstExecutionRunId);
    expect(await metricSteps(result)).toEqual(range(1, paused.step + 1));
    const segments = await segmentSteps(runId);
    expect(segments['segment-0001.parquet']).toEqual(range(1, paused.step));
    expect(segments['segment-0002.parquet']).toEqual([paused.step + 1]);

    // Both runs' histories (signals, updates, a cancelled segment, continue-as-new) replay deterministically.
    for (const run of [handle.firstExecutionRunId, undefined]) {
      const history = await client.workflow.getHandle(`${runId}/training`, run).fetchHistory();
      await Worker.runReplayHistory({ workflowsPath, replayName: 'training-replay' }, history, `${runId}/training`);
    }
  });

  it('a budget lowered below the running segment stops it at a checkpoint; the run ends exactly at the budget', async () => {
    const runId = 'train-it-lower';
    explainFailure(runId);
    const handle = await client.workflow.start('training', {
      taskQueue: cpuQueue,
      workflowId: `${runId}/training`,
      args: [trainingInput(runId, { steps: 40, segmentSteps: 40 })],
    });
    const at = (
      await waitFor(
        async () => {
          const s = await status(handle);
          return s.step >= 1 ? s : null;
        },
        200_000,
        'step 1',
      )
    ).step;
    const updated = await handle.executeUpdate<TrainingStatus, [number]>('setStepBudget', { args: [at + 2] });
    expect(updated.budget).toBe(at + 2);
    const result = (await handle.result()) as TrainingResult;
    // The 40-step trainer was stopped (it never ends on its own before step 40) ...
    expect(stdoutEvents(runId, 1, 1).some((e) => e.event === 'stopped')).toBe(true);
    // ... and the run ends exactly at the budget: the requested one, or, when the trainer had already passed it
    // before the stop reached it, the step it had reached, with a note saying so.
    expect(result.step).toBe(result.budget);
    expect(result.budget).toBeGreaterThanOrEqual(at + 2);
    if (result.budget > at + 2) expect(result.notes.join('\n')).toContain(`when the budget was lowered to ${at + 2}`);
    expect(result.stoppedEarly).toBe(false);
    expect(await metricSteps(result)).toEqual(range(1, result.step));
  });

  it('stopAfterCheckpoint ends the run at a checkpoint and writes its report', async () => {
    const runId = 'train-it-stop';
    explainFailure(runId);
    const handle = await client.workflow.start('training', {
      taskQueue: cpuQueue,
      workflowId: `${runId}/training`,
      args: [trainingInput(runId, { steps: 40, segmentSteps: 40 })],
    });
    await waitFor(async () => (await status(handle)).step >= 1, 200_000, 'step 1');
    expect((await codegrep('training', 'stop', runId)).stdout).toContain(`codegrep: stop sent to ${runId}/training`);
    const result = (await handle.result()) as TrainingResult;
    expect(result.stoppedEarly).toBe(true);
    expect(result.budget).toBe(40);
    expect(result.step).toBeGreaterThanOrEqual(1);
    expect(result.step).toBeLessThan(40);
    expect(result.segments).toBe(1);
    expect(await metricSteps(result)).toEqual(range(1, result.step));
    const checkpoints = readdirSync(path.join(runDir(runId), 'training', 'trainer', 'checkpoints')).filter((n) => n.startsWith('step-'));
    expect(checkpoints).toContain(`step-${String(result.step).padStart(8, '0')}`);
    expect(result.checkpoint).toBe(
      path.join(runDir(runId), 'training', 'trainer', 'checkpoints', `step-${String(result.step).padStart(8, '0')}`),
    );
    const markdown = readFileSync(result.report.markdown, 'utf8');
    expect(markdown).toContain(`| steps done / budget | ${result.step} / 40 (stopped early at a checkpoint) |`);
    expect(markdown).toContain('SMOKE RUN');
  });

  it('a trainer that ignores SIGTERM is killed with its process group after stopGraceMs: the GPU worker lives on and the resumed run trains to the end', async () => {
    const runId = 'train-it-stubborn';
    explainFailure(runId);
    // Stands in for the trainer executable (training.python): its first start is a trainer stuck in a CUDA or NCCL
    // call that ignores SIGTERM and never exits by itself; later starts are the real trainer.
    const firstStart = path.join(work, `${runId}.first-start`);
    const stubbornPython = path.join(work, 'stubborn-python.sh');
    writeFileSync(
      stubbornPython,
      [
        '#!/bin/sh',
        `if mkdir '${firstStart}' 2>/dev/null; then`,
        "  trap '' TERM",
        '  echo "stubborn trainer: ignoring SIGTERM" >&2',
        '  while :; do sleep 1; done',
        'fi',
        `exec '${path.join(repoRoot, '.venv/bin/python')}' "$@"`,
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
    const worker = gpuWorkers.at(-1)!;
    const handle = await client.workflow.start('training', {
      taskQueue: cpuQueue,
      workflowId: `${runId}/training`,
      args: [trainingInput(runId, { steps: 2, segmentSteps: 2, python: stubbornPython, stopGraceMs: 2_000 })],
    });
    const pidFile = path.join(runDir(runId), 'training', 'trainer.pid.json');
    await waitFor(async () => existsSync(pidFile), 200_000, 'the stubborn trainer to start');
    const stubbornPid = (JSON.parse(readFileSync(pidFile, 'utf8')) as { pid: number }).pid;
    // The pause cancels the segment: SIGTERM (ignored), then after stopGraceMs SIGKILL of the whole group.
    await handle.signal('pause');
    await waitFor(
      async () => {
        const s = await status(handle);
        return s.state === 'paused' && !s.segmentRunning;
      },
      120_000,
      'the paused state with no segment running',
    );
    expect(() => process.kill(stubbornPid, 0)).toThrow(); // the stubborn trainer is gone
    expect(worker.exitCode).toBeNull();
    expect(worker.signalCode).toBeNull();
    const log = readFileSync(gpuLog, 'utf8');
    expect(log).toContain('training: the trainer did not exit within 2000 ms of SIGTERM; killing its process group');
    expect(log).not.toContain('Activity context not initialized');

    // The same worker process runs the next segment, with the real trainer, to the end.
    await handle.signal('resume');
    const result = (await handle.result()) as TrainingResult;
    expect(result.step).toBe(2);
    expect(await metricSteps(result)).toEqual([1, 2]);
    expect(worker.exitCode).toBeNull();
    expect(worker.signalCode).toBeNull();
    expect(gpuWorkers.at(-1)).toBe(worker);
  });

  it('a segment on 2 trainer processes (torchrun, gloo): a killed rank fails the attempt, the retry resumes from the newest checkpoint, each step once; the report names the engine', async () => {
    const runId = 'train-it-ranks';
    explainFailure(runId);
    const handle = await client.workflow.start('training', {
      taskQueue: cpuQueue,
      workflowId: `${runId}/training`,
      args: [trainingInput(runId, { steps: 4, segmentSteps: 4, gpus: 2 })],
    });
    const steps = (attempt: number) =>
      stdoutEvents(runId, 1, attempt)
        .filter((e) => e.event === 'step')
        .map((e) => e.step!);
    await waitFor(async () => steps(1).length > 0, 200_000, 'a step of the first attempt');
    // The pid file holds torchrun's launcher; its children are the ranks.
    const launcher = (JSON.parse(readFileSync(path.join(runDir(runId), 'training', 'trainer.pid.json'), 'utf8')) as { pid: number }).pid;
    const children = readFileSync(`/proc/${launcher}/task/${launcher}/children`, 'utf8').trim().split(/\s+/).map(Number);
    const rank1 = children.find((pid) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes('RANK=1'));
    expect(rank1, `no RANK=1 child among ${children.join(', ')}`).toBeDefined();
    process.kill(rank1!, 'SIGKILL');

    const result = (await handle.result()) as TrainingResult;
    expect(result.step).toBe(4);
    expect(await metricSteps(result)).toEqual(range(1, 4));
    expect(await segmentSteps(runId)).toEqual({ 'segment-0001.parquet': range(1, 4) });
    const first = stdoutEvents(runId, 1, 1);
    expect(first.find((e) => e.event === 'start')).toMatchObject({ world_size: 2, backend: 'gloo' });
    expect(first.some((e) => e.event === 'done' || e.event === 'stopped')).toBe(false); // it failed, it did not finish
    const resumed = stdoutEvents(runId, 1, 2).find((e) => e.event === 'resumed')?.step;
    expect(resumed).toBeGreaterThanOrEqual(Math.max(...steps(1)));
    expect(steps(2)).toEqual(range(resumed! + 1, 4));
    const markdown = readFileSync(result.report.markdown, 'utf8');
    expect(markdown).toContain('| rollout engine | hf — generator: hf (configured) — 2 processes on cpu |');
  });
});

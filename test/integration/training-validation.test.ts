import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readParquetObjects } from '../../lib/artifacts';
import { bestValidatedStep } from '../../lib/training/validation-choice';
import type { PipelineResult } from '../../workflows/pipeline';
import { buildFixtureRepo } from '../support/fixture-repos';
import { spawnGpuWorkerProcess } from '../support/gpu-worker';
import { repoRoot } from '../support/repo-root';
import { killWorkerProcess, startWorker, testClient, uniqueTaskQueue } from '../support/temporal';

/**
 * Validation during training on the real dev server: the held-out split is refused when it shares a commit
 * with the training samples; otherwise every checkpoint is evaluated on the held-out instances through the
 * policy server (a child evaluation per checkpoint), recorded, and `checkpoint: best` serves the one with
 * the highest validation metric. The fixture: acme/widgets with two commits, and a third instance on the
 * second commit.
 */

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-validation-it-'));
const dataDir = path.join(work, 'runs');
const mirrors = path.join(work, 'mirrors');
const modelDir = path.join(work, 'tiny-model');
const cpuQueue = uniqueTaskQueue('validation-cpu');
const gpuQueue = uniqueTaskQueue('validation-gpu');
let instancesPath: string;
let trajectoriesPath: string;
let stopCpuWorker: () => Promise<void>;
let gpuWorker: ChildProcess | undefined;

beforeAll(async () => {
  const instances = buildFixtureRepo(work, mirrors);
  const sameCommit = { ...instances[1]!, instance_id: 'acme__widgets-3', problem_statement: 'belt_length is wrong for two pulleys.' };
  instancesPath = path.join(work, 'instances.jsonl');
  trajectoriesPath = path.join(work, 'trajectories.jsonl');
  writeFileSync(instancesPath, [...instances, sameCommit].map((i) => JSON.stringify(i)).join('\n') + '\n');
  writeFileSync(trajectoriesPath, '');
  execFileSync(path.join(repoRoot, '.venv/bin/python'), ['-m', 'trainer.random_model', '--out', modelDir, '--shape', 'tiny'], {
    cwd: repoRoot,
    stdio: 'ignore',
  });
  ({ stop: stopCpuWorker } = await startWorker(cpuQueue));
  gpuWorker = await spawnGpuWorkerProcess(
    gpuQueue,
    { OMP_NUM_THREADS: '1', MKL_NUM_THREADS: '1', TOKENIZERS_PARALLELISM: 'false' },
    path.join(work, 'gpu-worker.log'),
  );
}, 300_000);

afterAll(async () => {
  if (gpuWorker) await killWorkerProcess(gpuWorker);
  await stopCpuWorker?.();
  rmSync(work, { recursive: true, force: true });
});

async function runPipeline(runId: string, heldOut: string[], stages: string[]): Promise<PipelineResult> {
  const { client, close } = await testClient();
  try {
    const handle = await client.workflow.start('pipeline', {
      taskQueue: cpuQueue,
      workflowId: `${runId}/pipeline`,
      args: [
        {
          runId,
          dataDir,
          stages,
          inputs: { trajectories: trajectoriesPath, instances: instancesPath },
          environment: { repoSource: { kind: 'mirror-dir', dir: mirrors } },
          training: {
            modelDir,
            smokeRun: true,
            steps: 2,
            segmentSteps: 2,
            groupSize: 2,
            batchSize: 1,
            checkpointEvery: 1,
            limits: { maxTurns: 2, maxNewTokens: 16, maxNewTokensPerTurn: 8, maxSeqLen: 4000 },
            lora: { r: 4, alpha: 8 },
            trainer: { generator: 'hf', micro_batch_tokens: 8192 },
            gpuTaskQueue: gpuQueue,
            validation: { instances: heldOut, every: 1, metric: 'fileF1' },
          },
          evaluation: {
            retrievers: [{ name: 'trained', kind: 'agent', policy: 'trained', checkpoint: 'best', concurrency: 2 }],
            policyServer: { backend: 'hf' },
          },
        },
      ],
    });
    try {
      return (await handle.result()) as PipelineResult;
    } catch (error) {
      const details = (error as { cause?: { details?: unknown[] } }).cause?.details?.[0];
      if (details && typeof details === 'object' && 'outcomes' in details) return details as PipelineResult;
      throw error;
    }
  } finally {
    await close();
  }
}

describe('training.validation', () => {
  it('refuses a held-out instance that shares a repository commit with a training sample, naming both', async () => {
    const result = await runPipeline('validation-overlap', ['acme__widgets-2'], ['catm', 'environment', 'training']);
    const training = result.outcomes.find((o) => o.stage === 'training')!;
    expect(training.status).toBe('failed');
    expect(training.reason).toContain('share a repository commit with training samples');
    expect(training.reason).toContain('acme__widgets-3 (training) and acme__widgets-2 (held out)');
  }, 600_000);

  it('validates every checkpoint on the held-out split and serves the best by its metric', async () => {
    const runId = 'validation-best';
    const result = await runPipeline(runId, ['acme__widgets-2', 'acme__widgets-3'], ['catm', 'environment', 'training', 'evaluation']);
    expect(result.outcomes.map((o) => `${o.stage}:${o.status}${o.reason ? ` ${o.reason}` : ''}`)).toEqual([
      'catm:completed',
      'environment:completed',
      'training:completed',
      'evaluation:completed',
    ]);
    // The trainer saw the training sample only.
    const trainerConfig = JSON.parse(
      readFileSync(path.join(dataDir, runId, 'training', 'segments', 'segment-0001', 'attempt-01.config.json'), 'utf8'),
    ) as { data: { instance_ids: string[] } };
    expect(trainerConfig.data.instance_ids).toEqual(['acme__widgets-1']);

    // One validation per checkpoint, on the two held-out instances, each by the checkpoint it names.
    const rows = await readParquetObjects(path.join(dataDir, runId, 'training', 'validation.parquet'));
    expect(rows.map((r) => [r.step, r.metric, r.instances, r.servedModel])).toEqual([
      [1, 'fileF1', 2, `${runId}/step-00000001`],
      [2, 'fileF1', 2, `${runId}/step-00000002`],
    ]);
    const best = bestValidatedStep(rows.map((r) => ({ step: r.step as number, value: r.value as number | null })));
    expect(result.training!.validation!.bestStep).toBe(best);
    expect(readFileSync(result.training!.report.markdown, 'utf8')).toContain(`\`checkpoint: best\` is step ${best}`);

    // checkpoint: best served that step.
    expect(result.evaluation!.summaryValues.servedPolicies).toEqual([expect.objectContaining({ retriever: 'trained', step: best })]);
  }, 1_200_000);
});

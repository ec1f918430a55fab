import { execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readConfigFile } from '../../cli/config-file';
import { readParquetObjects } from '../../lib/artifacts';
import { PATH_INDEX_WEIGHT } from '../../lib/retrievers/bm25/params';
import { collectWorktreeFiles } from '../../lib/retrievers/bm25/worktree';
import type { PipelineResult } from '../../workflows/pipeline';
import { runBm25ReferenceBatch, type ReferenceSpec } from '../python/run-bm25-reference';
import { spawnGpuWorkerProcess } from '../support/gpu-worker';
import { repoRoot } from '../support/repo-root';
import { killWorkerProcess, startWorker, testClient, uniqueTaskQueue } from '../support/temporal';

/**
 * The demo config (data/sample/pipeline.yaml) end to end on the real dev server, offline, against the compact
 * mirrors in ../shared/repos (what `npm run demo -- --mirrors ../shared/repos` runs): CATM on the 13 real
 * trajectories, the environment on the 13 real base commits of seaborn, xarray, pylint and sphinx, the training
 * smoke run (the real trainer on a tiny random model, on the CPU), and the evaluation with BM25 and the real
 * all-MiniLM-L6-v2. BM25's rankings must equal rank_bm25's (test/python/bm25_reference.py, its own App. E
 * tokenizer) computed here from the same files.
 */

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-demo-it-'));
const cpuQueue = uniqueTaskQueue('demo-cpu');
const gpuQueue = uniqueTaskQueue('demo-gpu');
const modelDir = path.join(work, 'tiny-model');
const sharedRepos = path.resolve(repoRoot, '../shared/repos');
let stopCpuWorker: () => Promise<void>;
let gpuWorker: ChildProcess | undefined;
let result: PipelineResult;

beforeAll(async () => {
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
  const config = readConfigFile(path.join(repoRoot, 'data/sample/pipeline.yaml'));
  const training = config.training as Record<string, unknown>;
  const { client, close } = await testClient();
  try {
    result = await client.workflow.execute('pipeline', {
      taskQueue: cpuQueue,
      workflowId: 'demo-it/pipeline',
      args: [
        {
          ...config,
          runId: 'demo-it',
          dataDir: path.join(work, 'runs'),
          environment: { ...(config.environment as object), repoSource: { kind: 'mirror-dir', dir: sharedRepos } },
          training: { ...training, modelDir, gpuTaskQueue: gpuQueue },
        },
      ],
    });
  } finally {
    await close();
  }
}, 1_200_000);

afterAll(async () => {
  if (gpuWorker) await killWorkerProcess(gpuWorker);
  const pidFile = path.join(work, 'runs', 'demo-it', 'training', 'trainer.pid.json');
  if (existsSync(pidFile)) {
    try {
      process.kill(-(JSON.parse(readFileSync(pidFile, 'utf8')) as { pid: number }).pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await stopCpuWorker?.();
  rmSync(work, { recursive: true, force: true });
});

describe('the demo config end to end against ../shared/repos', () => {
  it('runs catm, environment, training (smoke) and evaluation to completion on the 13 instances', () => {
    expect(result.outcomes.map((o) => [o.stage, o.status, o.reason])).toEqual([
      ['catm', 'completed', null],
      ['environment', 'completed', null],
      ['training', 'completed', null],
      ['evaluation', 'completed', null],
    ]);
    const env = result.environment!;
    expect(env.materialize).toMatchObject({ commits: 13, repos: 4, failed: 0, droppedSamples: 0, onUnavailable: 'skip' });
    expect(env.groundTruth).toMatchObject({ samples: 13, withGroundTruth: 13, withoutWorktree: 0 });
    expect(result.training!.report.smokeRun).toBe(true);
    expect(result.training!.step).toBe(2);
    const summary = result.evaluation!.summaryValues;
    expect(summary.instances).toBe(13);
    expect(summary.retrievers.map((r) => [r.name, r.kind, r.instances, r.failed])).toEqual([
      ['bm25', 'bm25', 13, 0],
      ['minilm', 'dense', 13, 0],
      ['trained', 'agent', 13, 0],
    ]);
    // The third row is the checkpoint the run's own smoke training wrote, served on the CPU.
    expect(summary.servedPolicies).toEqual([
      expect.objectContaining({ retriever: 'trained', runId: 'demo-it', step: 2, model: 'demo-it/step-00000002', backend: 'hf' }),
    ]);
    for (const r of summary.retrievers) expect(r.table2.fBetaMean.ci).not.toBeNull();
    expect(readFileSync(result.evaluation!.report.html, 'utf8')).toContain('minilm');
    expect(readdirSync(path.join(work, 'runs', 'demo-it', 'evaluation'))).toEqual(
      expect.arrayContaining(['predictions.parquet', 'metrics.parquet', 'summary.json']),
    );
  });

  it('ranks exactly as rank_bm25 does on the same files (BM25 top-2 and the ranked list)', async () => {
    const predictions = (await readParquetObjects(result.evaluation!.predictions.uri)).filter((p) => p.retriever === 'bm25');
    const samples = await readParquetObjects(result.environment!.samples.uri);
    expect(predictions).toHaveLength(13);
    const specs: ReferenceSpec[] = [];
    const corpora: string[][] = [];
    for (const prediction of predictions) {
      const sample = samples.find((s) => s.instanceId === prediction.instanceId)!;
      const { files } = await collectWorktreeFiles(sample.worktreePath as string, { includeTests: true });
      corpora.push(files.map((f) => f.path));
      specs.push({
        mode: 'raw',
        docs: files.map((f) => f.content),
        paths: files.map((f) => f.path),
        path_weight: PATH_INDEX_WEIGHT,
        queries: [sample.problemStatement as string],
        top: 5,
      });
    }
    const references = runBm25ReferenceBatch(specs);
    predictions.forEach((prediction, i) => {
      const expected = references[i]!.rankings[0]!.map((doc) => corpora[i]![doc]!);
      expect({ instance: prediction.instanceId, ranked: (prediction.ranked as string[]).slice(0, 5) }).toEqual({
        instance: prediction.instanceId,
        ranked: expected,
      });
      expect(prediction.files).toEqual(expected.slice(0, 2));
    });
  });
});

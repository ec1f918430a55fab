import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readConfigFile } from '../../cli/config-file';
import { readParquetObjects } from '../../lib/artifacts';
import { PATH_INDEX_WEIGHT } from '../../lib/retrievers/bm25/params';
import { collectWorktreeFiles } from '../../lib/retrievers/bm25/worktree';
import type { PipelineResult } from '../../workflows/pipeline';
import { runBm25ReferenceBatch, type ReferenceSpec } from '../python/run-bm25-reference';
import { repoRoot } from '../support/repo-root';
import { startWorker, testClient, uniqueTaskQueue } from '../support/temporal';

/**
 * The demo config (data/sample/pipeline.yaml) end to end on the real dev server, offline, against the compact
 * mirrors in ../shared/repos (what `npm run demo -- --mirrors ../shared/repos` runs): CATM on the 13 real
 * trajectories, the environment on the 13 real base commits of seaborn, xarray, pylint and sphinx, and the
 * evaluation with BM25 and the real all-MiniLM-L6-v2 (the demo's training runs on the learnable task:
 * learn-demo.test.ts). BM25's rankings must equal rank_bm25's (test/python/bm25_reference.py, its own App. E
 * tokenizer) computed here from the same files.
 */

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-demo-it-'));
const cpuQueue = uniqueTaskQueue('demo-cpu');
const sharedRepos = path.resolve(repoRoot, '../shared/repos');
let stopCpuWorker: () => Promise<void>;
let result: PipelineResult;

beforeAll(async () => {
  ({ stop: stopCpuWorker } = await startWorker(cpuQueue));
  const config = readConfigFile(path.join(repoRoot, 'data/sample/pipeline.yaml'));
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
        },
      ],
    });
  } finally {
    await close();
  }
}, 1_200_000);

afterAll(async () => {
  await stopCpuWorker?.();
  rmSync(work, { recursive: true, force: true });
});

/** The commit's tree written under `work` by git (a private index, no worktree registered in the bare repository). */
function checkout(gitDir: string, commit: string): string {
  const dir = path.join(work, 'checkouts', commit);
  if (existsSync(dir)) return dir;
  mkdirSync(dir, { recursive: true });
  const env = { ...process.env, GIT_INDEX_FILE: path.join(work, 'checkouts', `${commit}.index`) };
  execFileSync('git', ['--git-dir', gitDir, '--work-tree', dir, 'read-tree', commit], { env });
  execFileSync('git', ['--git-dir', gitDir, '--work-tree', dir, 'checkout-index', '--all', '--force'], { env });
  return dir;
}

describe('the demo config end to end against ../shared/repos', () => {
  it('runs catm, environment and evaluation to completion on the 13 instances', () => {
    expect(result.outcomes.map((o) => [o.stage, o.status, o.reason])).toEqual([
      ['catm', 'completed', null],
      ['environment', 'completed', null],
      ['evaluation', 'completed', null],
    ]);
    const env = result.environment!;
    expect(env.materialize).toMatchObject({ commits: 13, repos: 4, failed: 0, droppedSamples: 0, onUnavailable: 'skip' });
    expect(env.groundTruth).toMatchObject({ samples: 13, withGroundTruth: 13, withoutWorktree: 0 });
    const summary = result.evaluation!.summaryValues;
    expect(summary.instances).toBe(13);
    expect(summary.retrievers.map((r) => [r.name, r.kind, r.instances, r.failed])).toEqual([
      ['bm25', 'bm25', 13, 0],
      ['minilm', 'dense', 13, 0],
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
      // A BM25-and-dense run makes no worktrees (they read the bare repository): check the commit out here, with
      // git itself, and read it from disk as the worktree scanner does.
      const { files } = await collectWorktreeFiles(checkout(sample.gitDir as string, sample.baseCommit as string), { includeTests: true });
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

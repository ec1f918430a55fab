import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readParquetObjects } from '../../lib/artifacts';
import { pipelineOutcome } from '../../cli/pipeline-outcome';
import type { PipelineResult } from '../../workflows/pipeline';
import { buildSweSmithFixture } from '../fixtures/codescout/swe-smith';
import { buildFixtureRepo, git, type FixtureInstance } from '../support/fixture-repos';
import { startWorker, testClient, uniqueTaskQueue } from '../support/temporal';

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-env-it-'));
const mirrors = path.join(work, 'mirrors');
const taskQueue = uniqueTaskQueue('env-it');
let stopWorker: () => Promise<void>;
let instances: FixtureInstance[];
const instancesPath = path.join(work, 'instances.jsonl');
const trajectoriesPath = path.join(work, 'trajectories.jsonl');

beforeAll(async () => {
  instances = buildFixtureRepo(work, mirrors);
  writeFileSync(instancesPath, instances.map((i) => JSON.stringify(i)).join('\n') + '\n');
  writeFileSync(trajectoriesPath, '');
  ({ stop: stopWorker } = await startWorker(taskQueue));
});
afterAll(async () => {
  await stopWorker?.();
  rmSync(work, { recursive: true, force: true });
});

/** Runs the pipeline; `failed` says whether it ended Failed in Temporal (a stage failed). */
async function runPipeline(runId: string, extra: Record<string, unknown>): Promise<{ result: PipelineResult; failed: boolean }> {
  const { client, close } = await testClient();
  try {
    const handle = await client.workflow.start('pipeline', {
      taskQueue,
      workflowId: `${runId}/pipeline`,
      args: [
        {
          runId,
          dataDir: path.join(work, 'runs'),
          stages: ['catm', 'environment'],
          inputs: { trajectories: trajectoriesPath, instances: instancesPath },
          ...extra,
        },
      ],
    });
    const outcome = await pipelineOutcome(handle);
    expect((await handle.describe()).status.name).toBe(outcome.failed ? 'FAILED' : 'COMPLETED');
    return outcome;
  } finally {
    await close();
  }
}

async function run(runId: string, extra: Record<string, unknown>): Promise<PipelineResult> {
  const { result, failed } = await runPipeline(runId, extra);
  expect(failed).toBe(false);
  return result;
}

describe('environment stage on the real dev server', () => {
  it('materializes a worktree per commit from local mirrors and derives ground truth with tree-sitter', async () => {
    const result = await run('env-ok', { environment: { repoSource: { kind: 'mirror-dir', dir: mirrors } } });
    expect(result.outcomes.map((o) => [o.stage, o.status])).toEqual([
      ['catm', 'completed'],
      ['environment', 'completed'],
    ]);
    const env = result.environment!;
    expect(env.materialize).toMatchObject({ commits: 2, created: 2, failed: 0, repos: 1 });

    const worktrees = await readParquetObjects(env.worktrees.uri);
    for (const row of worktrees) {
      expect(git(row.path as string, 'rev-parse', 'HEAD')).toBe(row.commit);
    }
    const samples = await readParquetObjects(env.samples.uri);
    const first = samples.find((s) => s.instanceId === 'acme__widgets-1')!;
    expect(first.gold_files).toEqual(['widgets/gears.py']);
    expect(first.gold_modules).toEqual(['widgets/gears.py:Gear']);
    expect(first.gold_functions).toEqual(['widgets/gears.py:Gear.circumference', 'widgets/gears.py:mesh']);
    expect(first.gold_changed_line_ranges).toEqual([
      { path: 'widgets/gears.py', start: 12, end: 12 },
      { path: 'widgets/gears.py', start: 21, end: 21 },
    ]);
    expect(first.groundTruthError).toBeNull();
    // The samples carried the gold patch from the catm stage: ground truth read no instances file.
    expect(first.goldPatch).toBe(instances[0]!.patch);
    const second = samples.find((s) => s.instanceId === 'acme__widgets-2')!;
    expect(second.gold_functions).toEqual(['widgets/belts.py:belt_length']);
    expect(second.gold_modules).toEqual([]);

    // Re-running reuses the verified worktrees instead of recreating them.
    const again = await run('env-ok', { environment: { repoSource: { kind: 'mirror-dir', dir: mirrors } } });
    expect(again.environment!.materialize).toMatchObject({ commits: 2, created: 0, reused: 2 });
  });

  it('a BM25-only evaluation run makes no worktree: ground truth and BM25 predictions come from the bare clone', async () => {
    const dataDir = path.join(work, 'runs-bare');
    const result = await run('env-bare', {
      dataDir,
      stages: ['catm', 'environment', 'evaluation'],
      environment: { repoSource: { kind: 'mirror-dir', dir: mirrors } },
    });
    expect(result.outcomes.map((o) => [o.stage, o.status])).toEqual([
      ['catm', 'completed'],
      ['environment', 'completed'],
      ['evaluation', 'completed'],
    ]);
    expect(existsSync(path.join(dataDir, 'worktrees'))).toBe(false);
    const bare = path.join(dataDir, 'repos', 'acme__widgets.git');
    const worktrees = await readParquetObjects(result.environment!.worktrees.uri);
    expect(worktrees.map((r) => r.path)).toEqual([bare, bare]);
    const samples = await readParquetObjects(result.environment!.samples.uri);
    const first = samples.find((s) => s.instanceId === 'acme__widgets-1')!;
    expect(first).toMatchObject({ worktreePath: null, gitDir: bare, groundTruthError: null });
    expect(first.gold_functions).toEqual(['widgets/gears.py:Gear.circumference', 'widgets/gears.py:mesh']);
    const predictions = await readParquetObjects(result.evaluation!.predictions.uri);
    expect(predictions.map((p) => p.error)).toEqual([null, null]);
    expect(predictions.every((p) => (p.files as string[]).length === 2)).toBe(true);
    expect(readdirSync(path.join(dataDir, 'bm25-terms'), { recursive: true }).some((f) => String(f).endsWith('.parquet'))).toBe(true);
  });

  it('onUnavailable: skip drops the samples of a missing repository with their reason and goes on with the rest', async () => {
    const withMissing = path.join(work, 'instances-with-missing.jsonl');
    const orphan = { ...instances[0]!, instance_id: 'acme__absent-1', repo: 'acme/absent' };
    writeFileSync(withMissing, [...instances, orphan].map((i) => JSON.stringify(i)).join('\n') + '\n');
    const result = await run('env-skip', {
      dataDir: path.join(work, 'runs-skip'),
      inputs: { trajectories: trajectoriesPath, instances: withMissing },
      environment: { repoSource: { kind: 'mirror-dir', dir: mirrors }, onUnavailable: 'skip' },
    });
    expect(result.outcomes.map((o) => [o.stage, o.status])).toEqual([
      ['catm', 'completed'],
      ['environment', 'completed'],
    ]);
    const env = result.environment!;
    expect(env.materialize).toMatchObject({ commits: 3, created: 2, failed: 1, droppedSamples: 1, onUnavailable: 'skip' });
    expect(env.materialize.dropped).toEqual([
      {
        instanceId: 'acme__absent-1',
        repo: 'acme/absent',
        commit: orphan.base_commit,
        reason: expect.stringMatching(/no local mirror of acme\/absent/),
      },
    ]);
    const droppedRows = await readParquetObjects(env.dropped!.uri);
    expect(droppedRows).toEqual([expect.objectContaining({ instanceId: 'acme__absent-1', repo: 'acme/absent' })]);
    // The later stages see only the samples that have a worktree.
    const samples = await readParquetObjects(env.samples.uri);
    expect(samples.map((s) => s.instanceId).sort()).toEqual(['acme__widgets-1', 'acme__widgets-2']);
    expect(env.groundTruth).toMatchObject({ samples: 3, withoutWorktree: 1, withGroundTruth: 2 });

    // fail: the same input fails the stage, all or nothing, and says how to go on.
    const { result: strict, failed: strictFailed } = await runPipeline('env-strict', {
      dataDir: path.join(work, 'runs-skip'),
      inputs: { trajectories: trajectoriesPath, instances: withMissing },
      environment: { repoSource: { kind: 'mirror-dir', dir: mirrors }, onUnavailable: 'fail' },
    });
    expect(strictFailed).toBe(true); // Failed in Temporal, not a green Completed
    expect(strict.outcomes[1]).toMatchObject({ stage: 'environment', status: 'failed' });
    expect(strict.outcomes[1]!.reason).toMatch(/1 of 3 commits could not be materialized.*acme\/absent.*onUnavailable: skip/);
  });

  it('onUnavailable: skip still fails the stage when no sample is usable, naming why', async () => {
    const { result, failed } = await runPipeline('env-skip-none', {
      dataDir: path.join(work, 'runs-skip-none'),
      environment: { repoSource: { kind: 'mirror-dir', dir: path.join(work, 'no-mirrors-here') }, onUnavailable: 'skip' },
    });
    expect(result.outcomes[1]).toMatchObject({ stage: 'environment', status: 'failed' });
    expect(result.outcomes[1]!.reason).toMatch(
      /no usable sample: none of the 2 commits could be materialized.*acme\/widgets.*environment\.repoSource/,
    );
    expect(failed).toBe(true);
  });

  it('fails fast on an unreachable repository, naming it and the mirror config key; the pipeline reports what ran', async () => {
    const { result, failed } = await runPipeline('env-unreachable', {
      // Its own data dir: the first test's bare clone cache would otherwise serve the repository.
      dataDir: path.join(work, 'runs-offline'),
      environment: { repoSource: { kind: 'mirror-dir', dir: path.join(work, 'no-mirrors-here') } },
    });
    expect(result.outcomes[0]).toMatchObject({ stage: 'catm', status: 'completed' });
    expect(result.outcomes[1]).toMatchObject({ stage: 'environment', status: 'failed' });
    expect(result.outcomes[1]!.reason).toContain('acme/widgets');
    expect(result.outcomes[1]!.reason).toContain('environment.repoSource');
    // Failed in Temporal (not a green Completed), and each hint said once.
    expect(failed).toBe(true);
    expect(result.outcomes[1]!.reason!.split('environment.repoSource').length - 1).toBe(1);
    expect(result.environment).toBeNull();
  });

  it("CodeScout's SWE-Smith Parquet (use_patch): head + bug patch worktrees, ground truth from file_changes, named drops", async () => {
    const fixture = buildSweSmithFixture(path.join(work, 'swe-smith'));
    const result = await run('env-swe-smith', {
      dataDir: path.join(work, 'runs-swe-smith'),
      inputs: { trajectories: trajectoriesPath, instances: fixture.parquet },
      // A budget smaller than one checkout: the stage's own worktrees are held while it runs, so none is pruned.
      environment: { repoSource: { kind: 'mirror-dir', dir: fixture.mirrors }, onUnavailable: 'skip', maxWorktreeBytes: 1 },
    });
    const env = result.environment!;
    expect(result.catm!.summaryValues.weighting.samplesWritten).toBe(4);
    expect(env.materialize).toMatchObject({ commits: 4, created: 2, failed: 2, droppedSamples: 2 });
    expect(env.materialize.budget).toMatchObject({ maxBytes: 1, removedWorktrees: 0, overBudget: true });
    expect(env.materialize.run).toMatchObject({ worktrees: 2, repos: 1 });
    expect(env.materialize.run!.worktreeBytes).toBeGreaterThan(0);
    expect(env.materialize.dropped.map((d) => [d.instanceId, d.reason.split(':')[0]])).toEqual([
      ['acme__widgets.0123abcd.lm_rewrite__stale0003', 'patch-failed'],
      ['acme__absent.deadbeef.lm_rewrite__gone0004', 'mirror-missing'],
    ]);

    const samples = await readParquetObjects(env.samples.uri);
    expect(samples.map((s) => s.instanceId)).toEqual([
      'acme__widgets.0123abcd.lm_rewrite__circ0001',
      'acme__widgets.0123abcd.func_pm_class_rm_funcs__size0002',
    ]);
    const [rewrite, removed] = samples as [Record<string, unknown>, Record<string, unknown>];
    // The sandbox's usual worktree: <worktreesDir>/<owner>__<name>/<commit>, at the patched commit, head below it.
    expect(rewrite.worktreePath).toBe(
      path.join(work, 'runs-swe-smith', 'worktrees', 'swesmith__acme__widgets.0123abcd', rewrite.baseCommit as string),
    );
    expect(git(rewrite.worktreePath as string, 'rev-parse', 'HEAD', 'HEAD~1').split('\n')).toEqual([rewrite.baseCommit, fixture.head]);
    expect(rewrite.patchedFrom).toBe(fixture.head);
    expect(git(rewrite.worktreePath as string, 'show', 'HEAD:widgets/gears.py')).toContain('return math.pi * module\n');
    expect(rewrite.problemStatement).toBe('Gear.circumference ignores the number of teeth.\n(as the prompt shows it)');
    expect(rewrite).toMatchObject({
      groundTruthError: null,
      gold_files: ['widgets/gears.py'],
      gold_modules: ['widgets/gears.py:Gear'],
      gold_functions: ['widgets/gears.py:Gear.circumference'],
      gold_changed_line_ranges: [{ path: 'widgets/gears.py', start: 9, end: 9 }],
    });
    // The fix adds the removed method back: file and class are targets; the added method is not (CodeScout §3.1).
    expect(removed).toMatchObject({
      groundTruthError: null,
      gold_files: ['widgets/gears.py'],
      gold_modules: ['widgets/gears.py:Gear'],
      gold_functions: [],
    });
    expect(removed.baseCommit).not.toBe(rewrite.baseCommit);
  });
});

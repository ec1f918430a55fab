import path from 'node:path';
import { ApplicationFailure, Context, log } from '@temporalio/activity';
import { hashConfig, readRows, writeParquetArtifact } from '../lib/artifacts';
import { diskSummary, materializeAll } from '../lib/worktrees';
import { MaterializeInputSchema, type MaterializeInput, type MaterializeOutput, type MaterializeSummary } from '../schemas/environment';
import { SampleSchema } from '../schemas/samples';
import { REPO_SOURCE_CONFIG_KEY, WORKTREES_SCHEMA_NAME, WORKTREES_SCHEMA_VERSION, worktreesArrowSchema, type WorktreeRequest } from '../schemas/worktrees';
import { ProgressReporter } from './progress';

/**
 * Environment stage (CodeGrep §3.3): one bare clone per repository and one git worktree per (repo, commit) of
 * the samples. Idempotent: verified worktrees are reused, half-made ones rebuilt, so a retry after a killed
 * worker redoes only what was not finished. A repository that cannot be reached fails the stage at once
 * (non-retryable), naming it and the config key for a local mirror, after the rows of the others are written.
 */
export async function materializeWorktrees(rawInput: MaterializeInput): Promise<MaterializeOutput> {
  const input = MaterializeInputSchema.parse(rawInput);
  const requests: WorktreeRequest[] = [];
  const seen = new Set<string>();
  for await (const record of readRows(input.samples.uri)) {
    if ('error' in record) throw new Error(`samples ${input.samples.uri} row ${record.ordinal}: ${record.error}`);
    const sample = SampleSchema.parse(record.row);
    const key = `${sample.repo}@${sample.baseCommit}`;
    if (!seen.has(key)) {
      seen.add(key);
      requests.push({ repo: sample.repo, commit: sample.baseCommit });
    }
  }

  const progress = new ProgressReporter();
  const counts = { created: 0, reused: 0, repaired: 0, failed: 0 };
  let results;
  try {
    results = await materializeAll(requests, {
      source: input.environment.repoSource,
      cacheDir: input.environment.cacheDir,
      worktreesDir: input.environment.worktreesDir,
      concurrencyAcrossRepos: input.environment.concurrencyAcrossRepos,
      signal: Context.current().cancellationSignal,
      onProgress: ({ done, total, result }) => {
        counts[result.status] += 1;
        progress.report({ stage: 'worktrees', done, total, unit: 'commits', counts: { ...counts } });
      },
    });
  } finally {
    progress.close();
  }

  const worktrees = await writeParquetArtifact({
    path: path.join(input.runDir, 'environment', 'worktrees.parquet'),
    schemaName: WORKTREES_SCHEMA_NAME,
    schemaVersion: WORKTREES_SCHEMA_VERSION,
    arrowSchema: worktreesArrowSchema,
    rows: results.map((r) => ({ ...r, error: r.error ?? null })),
    inputs: [input.samples],
    configHash: hashConfig({ stage: 'worktrees', source: input.environment.repoSource, worktreesDir: input.environment.worktreesDir }),
  });

  const disk = await diskSummary({ cacheDir: input.environment.cacheDir, worktreesDir: input.environment.worktreesDir });
  const okMs = results.filter((r) => r.status !== 'failed').map((r) => r.ms).sort((a, b) => a - b);
  const failures = results.filter((r) => r.status === 'failed');
  const unreachable = [...new Set(failures.map((r) => `${r.repo}: ${r.error ?? 'failed'}`))];
  const summary: MaterializeSummary = {
    commits: results.length,
    ...counts,
    repos: new Set(requests.map((r) => r.repo)).size,
    medianMs: okMs.length > 0 ? okMs[Math.floor((okMs.length - 1) / 2)]! : null,
    bareBytes: disk.bareBytes,
    worktreeBytes: disk.worktreeBytes,
    estimatedFullClonesBytes: disk.estimatedFullClonesBytes,
    savedRatio: Number.isFinite(disk.savedRatio) ? disk.savedRatio : null,
    unreachable,
  };
  progress.report({ stage: 'worktrees', done: results.length, total: results.length, unit: 'commits', counts: { ...counts } });
  await progress.flush();
  log.info('worktrees: done', { ...summary, unreachable: unreachable.length });

  if (failures.length > 0) {
    const repos = [...new Set(failures.map((r) => r.repo))];
    throw ApplicationFailure.create({
      type: 'RepositoryUnreachable',
      nonRetryable: true,
      message:
        `${failures.length} of ${results.length} commits could not be materialized (${repos.length} repositories: ${repos.slice(0, 5).join(', ')}${repos.length > 5 ? ', …' : ''}). ` +
        // The hint once: the first error usually names the config key already.
        `First error: ${unreachable[0]}. ${unreachable[0]?.includes(REPO_SOURCE_CONFIG_KEY) ? '' : `Point ${REPO_SOURCE_CONFIG_KEY} at local mirrors ({ kind: mirror-dir, dir: <folder with <owner>__<name>.git> }) when offline. `}` +
        `The rows of every commit are in ${worktrees.uri}.`,
      details: [summary],
    });
  }
  return { worktrees, summary };
}

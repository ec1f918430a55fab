import path from 'node:path';
import { Context, log } from '@temporalio/activity';
import type { z } from 'zod';
import { hashConfig, readArtifactRows, writeParquetArtifact } from '../lib/artifacts';
import { diskSummary, materializeAll, runDiskSummary, type BudgetResult } from '../lib/worktrees';
import {
  budgetSummary,
  droppedSamples,
  materializeSummary,
  unavailableMessage,
  worktreeRequests,
} from '../lib/worktrees/materialize-report';
import {
  DROPPED_SCHEMA_NAME,
  DROPPED_SCHEMA_VERSION,
  MaterializeInputSchema,
  droppedArrowSchema,
  type DroppedSample,
  type MaterializeInput,
  type MaterializeOutput,
  type MaterializeSummary,
} from '../schemas/environment';
import type { ArtifactRef } from '../schemas/artifact-ref';
import { SampleSchema } from '../schemas/samples';
import {
  WORKTREES_SCHEMA_NAME,
  WORKTREES_SCHEMA_VERSION,
  worktreesArrowSchema,
  type WorktreeRequest,
  type WorktreeResult,
  type WorktreeStatus,
} from '../schemas/worktrees';
import { nonRetryable, ProgressReporter } from './kit';

/**
 * Environment stage (CodeGrep §3.3): one bare repository per repository and one git worktree per (repo,
 * commit) of the samples. Idempotent: verified worktrees are reused, half-made ones rebuilt, so a retry after a
 * killed worker redoes only what was not finished. A commit that cannot be materialized (unreachable
 * repository, missing commit) is never retried; with `onUnavailable: fail` it fails the stage (non-retryable,
 * naming the repository and the config key for a local mirror), with `skip` its samples are dropped with the
 * reason into environment/dropped.parquet and the stage goes on with the rest. No usable sample at all fails
 * the stage either way.
 */
export async function materializeWorktrees(rawInput: MaterializeInput): Promise<MaterializeOutput> {
  const input = MaterializeInputSchema.parse(rawInput);
  const { cacheDir, worktreesDir, onUnavailable } = input.environment;
  const { requests, samplesByCommit } = await worktreeRequests(
    readArtifactRows(input.samples.uri, (row) => SampleSchema.parse(row), 'samples'),
  );
  const progress = new ProgressReporter();
  let made: Materialized;
  try {
    made = await materialize(input, requests, progress);
  } finally {
    progress.close();
  }
  const { results, counts } = made;
  const worktrees = await writeWorktrees(input, results);
  const failures = results.filter((r) => r.status === 'failed');
  const droppedRows = onUnavailable === 'skip' ? droppedSamples(failures, samplesByCommit) : [];
  const dropped = onUnavailable === 'skip' ? await writeDropped(input, droppedRows, worktrees) : null;
  const summary = materializeSummary(
    requests,
    results,
    counts,
    await diskSummary({ cacheDir, worktreesDir }),
    onUnavailable,
    droppedRows,
    await runDiskSummary(results, { cacheDir }),
    budgetSummary(input.environment.maxWorktreeBytes, made.budgetChecks),
  );
  if (summary.budget?.overBudget)
    log.warn('worktrees: over environment.maxWorktreeBytes with only held or in-use worktrees left', { ...summary.budget });
  progress.report({ stage: 'worktrees', done: results.length, total: results.length, unit: 'commits', counts: { ...counts } });
  await progress.flush();
  log.info('worktrees: done', { ...summary, unreachable: summary.unreachable.length });

  failOnUnavailable(input, results, worktrees, summary);
  if (droppedRows.length > 0)
    log.warn('worktrees: samples dropped (onUnavailable: skip)', { dropped: droppedRows.length, table: dropped?.uri });
  return { worktrees, dropped, summary };
}

type ParsedInput = z.output<typeof MaterializeInputSchema>;
type Materialized = { results: WorktreeResult[]; counts: Record<WorktreeStatus, number>; budgetChecks: BudgetResult[] };

/** Every requested tree, made or reused, with progress per commit and the disk budget's checks. */
async function materialize(input: ParsedInput, requests: WorktreeRequest[], progress: ProgressReporter): Promise<Materialized> {
  const { repoSource, cacheDir, worktreesDir } = input.environment;
  const counts = { created: 0, reused: 0, repaired: 0, failed: 0 };
  const budgetChecks: BudgetResult[] = [];
  const results = await materializeAll(requests, {
    source: repoSource,
    cacheDir,
    worktreesDir,
    concurrencyAcrossRepos: input.environment.concurrencyAcrossRepos,
    checkout: input.checkout,
    signal: Context.current().cancellationSignal,
    ...(input.environment.maxWorktreeBytes !== undefined ? { maxWorktreeBytes: input.environment.maxWorktreeBytes } : {}),
    onBudget: (r) => {
      budgetChecks.push(r);
      if (r.removed.length > 0) log.info('worktrees: disk budget pruned', { removed: r.removed.length, bytesAfter: r.bytesAfter });
    },
    onProgress: ({ done, total, result }) => {
      counts[result.status] += 1;
      progress.report({ stage: 'worktrees', done, total, unit: 'commits', counts: { ...counts } });
    },
  });
  return { results, counts, budgetChecks };
}

/** environment/worktrees.parquet: one row per requested commit, failed ones with their error. */
function writeWorktrees(input: ParsedInput, results: readonly WorktreeResult[]): Promise<ArtifactRef> {
  const { repoSource, worktreesDir } = input.environment;
  return writeParquetArtifact({
    path: path.join(input.runDir, 'environment', 'worktrees.parquet'),
    schemaName: WORKTREES_SCHEMA_NAME,
    schemaVersion: WORKTREES_SCHEMA_VERSION,
    arrowSchema: worktreesArrowSchema,
    rows: results.map((r) => ({ ...r, error: r.error ?? null })),
    inputs: [input.samples],
    configHash: hashConfig({ stage: 'worktrees', source: repoSource, worktreesDir, ...(input.checkout ? {} : { checkout: false }) }),
  });
}

/** environment/dropped.parquet (`onUnavailable: skip`): the samples of the commits that could not be made, with why. */
function writeDropped(input: ParsedInput, rows: readonly DroppedSample[], worktrees: ArtifactRef): Promise<ArtifactRef> {
  return writeParquetArtifact({
    path: path.join(input.runDir, 'environment', 'dropped.parquet'),
    schemaName: DROPPED_SCHEMA_NAME,
    schemaVersion: DROPPED_SCHEMA_VERSION,
    arrowSchema: droppedArrowSchema,
    rows,
    inputs: [input.samples, worktrees],
    configHash: hashConfig({ stage: 'worktrees-dropped', onUnavailable: input.environment.onUnavailable }),
  });
}

/**
 * Fails the stage (non-retryable) when a commit could not be made and `onUnavailable` is fail, when no commit
 * could be, or when there was no sample at all.
 */
function failOnUnavailable(
  input: ParsedInput,
  results: readonly WorktreeResult[],
  worktrees: ArtifactRef,
  summary: MaterializeSummary,
): void {
  const { onUnavailable } = input.environment;
  const failures = results.filter((r) => r.status === 'failed');
  const allFailed = results.length > 0 && failures.length === results.length;
  if (failures.length > 0 && (onUnavailable === 'fail' || allFailed)) {
    throw nonRetryable(
      allFailed ? 'NoUsableSamples' : 'RepositoryUnreachable',
      unavailableMessage(results, onUnavailable, worktrees.uri),
      summary,
    );
  }
  if (results.length === 0) throw nonRetryable('NoUsableSamples', `no usable sample: the samples input ${input.samples.uri} has no rows`);
}

import path from 'node:path';
import { ApplicationFailure, Context, log } from '@temporalio/activity';
import { hashConfig, readRows, writeParquetArtifact } from '../lib/artifacts';
import { diskSummary, materializeAll } from '../lib/worktrees';
import {
  DROPPED_LISTED,
  DROPPED_SCHEMA_NAME,
  DROPPED_SCHEMA_VERSION,
  MaterializeInputSchema,
  droppedArrowSchema,
  type MaterializeInput,
  type MaterializeOutput,
  type MaterializeSummary,
} from '../schemas/environment';
import { SampleSchema } from '../schemas/samples';
import { REPO_SOURCE_CONFIG_KEY, WORKTREES_SCHEMA_NAME, WORKTREES_SCHEMA_VERSION, worktreesArrowSchema, type WorktreeRequest } from '../schemas/worktrees';
import { ProgressReporter } from './kit';

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
  const requests: WorktreeRequest[] = [];
  /** Instance ids per `repo@commit`, in sample order. */
  const samplesByCommit = new Map<string, string[]>();
  for await (const record of readRows(input.samples.uri)) {
    if ('error' in record) throw new Error(`samples ${input.samples.uri} row ${record.ordinal}: ${record.error}`);
    const sample = SampleSchema.parse(record.row);
    const key = `${sample.repo}@${sample.baseCommit}`;
    const ids = samplesByCommit.get(key);
    if (ids) ids.push(sample.instanceId);
    else {
      samplesByCommit.set(key, [sample.instanceId]);
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
  const onUnavailable = input.environment.onUnavailable;
  const droppedRows =
    onUnavailable === 'skip'
      ? failures.flatMap((r) =>
          (samplesByCommit.get(`${r.repo}@${r.commit}`) ?? []).map((instanceId) => ({ instanceId, repo: r.repo, commit: r.commit, reason: r.error ?? 'failed' })),
        )
      : [];
  const dropped =
    onUnavailable === 'skip'
      ? await writeParquetArtifact({
          path: path.join(input.runDir, 'environment', 'dropped.parquet'),
          schemaName: DROPPED_SCHEMA_NAME,
          schemaVersion: DROPPED_SCHEMA_VERSION,
          arrowSchema: droppedArrowSchema,
          rows: droppedRows,
          inputs: [input.samples, worktrees],
          configHash: hashConfig({ stage: 'worktrees-dropped', onUnavailable }),
        })
      : null;
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
    onUnavailable,
    droppedSamples: droppedRows.length,
    dropped: droppedRows.slice(0, DROPPED_LISTED),
  };
  progress.report({ stage: 'worktrees', done: results.length, total: results.length, unit: 'commits', counts: { ...counts } });
  await progress.flush();
  log.info('worktrees: done', { ...summary, unreachable: unreachable.length });

  const allFailed = results.length > 0 && failures.length === results.length;
  if (failures.length > 0 && (onUnavailable === 'fail' || allFailed)) {
    const repos = [...new Set(failures.map((r) => r.repo))];
    const what = allFailed
      ? `no usable sample: none of the ${results.length} commits could be materialized`
      : `${failures.length} of ${results.length} commits could not be materialized`;
    throw ApplicationFailure.create({
      type: allFailed ? 'NoUsableSamples' : 'RepositoryUnreachable',
      nonRetryable: true,
      message:
        `${what} (${repos.length} repositories: ${repos.slice(0, 5).join(', ')}${repos.length > 5 ? ', …' : ''}). ` +
        // Each hint once: the first error usually names the config key for mirrors already.
        `First error: ${unreachable[0]}. ` +
        `${unreachable[0]?.includes(REPO_SOURCE_CONFIG_KEY) ? 'Offline: `codegrep run --mirrors DIR`' : `Point ${REPO_SOURCE_CONFIG_KEY} at local mirrors ({ kind: mirror-dir, dir: <folder with <owner>__<name>.git> }, or \`codegrep run --mirrors DIR\`) when offline`}` +
        `${onUnavailable === 'fail' ? `, or set environment.onUnavailable: skip to go on with the samples that can be materialized` : ''}. ` +
        `The rows of every commit are in ${worktrees.uri}.`,
      details: [summary],
    });
  }
  if (results.length === 0) {
    throw ApplicationFailure.create({ type: 'NoUsableSamples', nonRetryable: true, message: `no usable sample: the samples input ${input.samples.uri} has no rows` });
  }
  if (droppedRows.length > 0) log.warn('worktrees: samples dropped (onUnavailable: skip)', { dropped: droppedRows.length, table: dropped?.uri });
  return { worktrees, dropped, summary };
}

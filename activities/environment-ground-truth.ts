import path from 'node:path';
import { log } from '@temporalio/activity';
import { findCachedArtifact, hashConfig, writeParquetArtifact } from '../lib/artifacts';
import { RUN_ARTIFACTS } from '../lib/paths/run-artifacts';
import { groundTruthRows, samplesWithWorktree, usableWorktrees } from '../lib/patch/ground-truth-rows';
import { emptyGroundTruthSummary, samplesWithoutGoldPatchMessage, summarizeGroundTruthArtifact } from '../lib/patch/sample-ground-truth';
import {
  ENVIRONMENT_SAMPLES_SCHEMA_NAME,
  ENVIRONMENT_SAMPLES_SCHEMA_VERSION,
  GroundTruthInputSchema,
  environmentSamplesArrowSchema,
  type GroundTruthInput,
  type GroundTruthOutput,
} from '../schemas/environment';
import { nonRetryable, ProgressReporter } from './kit';

/**
 * Ground truth from the gold patches (docs/design.md "Ground truth from patches"; CodeScout §3.1): files, pre-image line ranges, and the classes
 * and functions they touch, found with tree-sitter on the pre-image in each sample's worktree. The samples carry
 * their gold patch (the instances file is not read again). Written as the samples artifact with the
 * ground-truth columns (schemas/environment.ts).
 */
export async function deriveGroundTruth(rawInput: GroundTruthInput): Promise<GroundTruthOutput> {
  const input = GroundTruthInputSchema.parse(rawInput);
  const outdated = samplesWithoutGoldPatchMessage(input.samples);
  if (outdated !== null) throw nonRetryable('SamplesWithoutGoldPatch', outdated);
  const outPath = path.join(input.runDir, RUN_ARTIFACTS.environmentSamples);
  // `samplesWithoutWorktree: dropped`: samples of commits that could not be materialized are not rows any more.
  // `gitDir`: the samples carry their bare repository (BM25 and dense read it); `checkout: false`: no worktrees.
  const configHash = hashConfig({ stage: 'ground-truth', samplesWithoutWorktree: 'dropped', gitDir: true, checkout: input.checkout });
  const worktrees = await usableWorktrees(input.worktrees.uri);
  const { samples, withoutWorktree } = await samplesWithWorktree(input.samples.uri, worktrees);
  const expectation = {
    schemaName: ENVIRONMENT_SAMPLES_SCHEMA_NAME,
    schemaVersion: ENVIRONMENT_SAMPLES_SCHEMA_VERSION,
    inputs: [input.samples, input.worktrees],
    configHash,
  };
  const cached = await findCachedArtifact(outPath, expectation);
  if (cached) {
    log.info('ground truth: cache hit', { samples: cached.uri });
    const summary = await summarizeGroundTruthArtifact(cached.uri);
    return { samples: cached, summary: { ...summary, samples: summary.samples + withoutWorktree, withoutWorktree }, cached: true };
  }

  const summary = { ...emptyGroundTruthSummary(), samples: withoutWorktree, withoutWorktree };
  const progress = new ProgressReporter();
  let rows;
  try {
    rows = await groundTruthRows(samples, worktrees, {
      checkout: input.checkout,
      summary,
      onRow: (done) =>
        progress.report({
          stage: 'ground-truth',
          done,
          total: samples.length,
          unit: 'samples',
          counts: { derived: summary.withGroundTruth },
        }),
    });
  } finally {
    progress.close();
  }
  const out = await writeParquetArtifact({ path: outPath, arrowSchema: environmentSamplesArrowSchema, rows, ...expectation });
  await progress.flush();
  log.info('ground truth: done', { ...summary });
  return { samples: out, summary, cached: false };
}

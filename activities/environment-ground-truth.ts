import path from 'node:path';
import { log } from '@temporalio/activity';
import { findCachedArtifact, hashConfig, readArtifactRows, readRows, sourceRef, writeParquetArtifact } from '../lib/artifacts';
import { RUN_ARTIFACTS } from '../lib/paths/run-artifacts';
import {
  emptyGroundTruthSummary,
  fixPatchOf,
  goldPatches,
  sampleGroundTruth,
  summarizeGroundTruthArtifact,
} from '../lib/patch/sample-ground-truth';
import {
  ENVIRONMENT_SAMPLES_SCHEMA_NAME,
  ENVIRONMENT_SAMPLES_SCHEMA_VERSION,
  GroundTruthInputSchema,
  environmentSamplesArrowSchema,
  type GroundTruthInput,
  type GroundTruthOutput,
} from '../schemas/environment';
import { git } from '../lib/worktrees/git';
import { groundTruthToColumns } from '../schemas/ground-truth';
import { SampleSchema, type Sample } from '../schemas/samples';
import { treeKey, WorktreeResultSchema, type WorktreeResult } from '../schemas/worktrees';
import { ProgressReporter } from './kit';

const commonDirs = new Map<string, Promise<string | null>>();
/** The bare repository a worktree belongs to (null when git cannot tell: the pre-image is then read through the worktree). */
function commonGitDir(worktree: string): Promise<string | null> {
  let found = commonDirs.get(worktree);
  if (!found) {
    found = git(['rev-parse', '--path-format=absolute', '--git-common-dir'], { cwd: worktree, timeoutMs: 60_000 }).then(
      (out) => out.trim(),
      () => null,
    );
    commonDirs.set(worktree, found);
  }
  return found;
}

/**
 * Ground truth from the gold patches (docs/design.md "Ground truth from patches"; CodeScout §3.1): files, pre-image line ranges, and the classes
 * and functions they touch, found with tree-sitter on the pre-image in each sample's worktree. Written as the
 * samples artifact with the ground-truth columns (schema version 2).
 */
export async function deriveGroundTruth(rawInput: GroundTruthInput): Promise<GroundTruthOutput> {
  const input = GroundTruthInputSchema.parse(rawInput);
  const outPath = path.join(input.runDir, RUN_ARTIFACTS.environmentSamples);
  const instances = await sourceRef(input.instancesPath);
  const inputs = [input.samples, input.worktrees, instances];
  // `samplesWithoutWorktree: dropped`: samples of commits that could not be materialized are not rows any more.
  // `gitDir`: the samples carry their bare repository (BM25 and dense read it); `checkout: false`: no worktrees.
  const configHash = hashConfig({ stage: 'ground-truth', samplesWithoutWorktree: 'dropped', gitDir: true, checkout: input.checkout });
  const worktreeByCommit = new Map<string, WorktreeResult>();
  for await (const record of readRows(input.worktrees.uri)) {
    if ('error' in record) continue;
    const row = WorktreeResultSchema.parse(record.row);
    if (row.status !== 'failed') worktreeByCommit.set(treeKey(row), row);
  }
  // A sample whose commit could not be materialized was dropped by the worktrees step (onUnavailable: skip,
  // listed in environment/dropped.parquet with its reason): the later stages see only the rest.
  const samples: Sample[] = [];
  let withoutWorktree = 0;
  for await (const sample of readArtifactRows(input.samples.uri, (row) => SampleSchema.parse(row), 'samples')) {
    if (worktreeByCommit.has(treeKey(sample))) samples.push(sample);
    else withoutWorktree++;
  }
  const expectation = {
    schemaName: ENVIRONMENT_SAMPLES_SCHEMA_NAME,
    schemaVersion: ENVIRONMENT_SAMPLES_SCHEMA_VERSION,
    inputs,
    configHash,
  };
  const cached = await findCachedArtifact(outPath, expectation);
  if (cached) {
    log.info('ground truth: cache hit', { samples: cached.uri });
    const summary = await summarizeGroundTruthArtifact(cached.uri);
    return { samples: cached, summary: { ...summary, samples: summary.samples + withoutWorktree, withoutWorktree }, cached: true };
  }
  const summary = { ...emptyGroundTruthSummary(), samples: withoutWorktree, withoutWorktree };
  const { patches, fileChanges } = await goldPatches(input.instancesPath, new Set(samples.map((s) => s.instanceId)));

  const progress = new ProgressReporter();
  const rows: Record<string, unknown>[] = [];
  try {
    for (const sample of samples) {
      summary.samples++;
      const worktree = worktreeByCommit.get(treeKey(sample))!;
      const materialized = worktree.path;
      // With checkouts the row is a worktree and its bare repository is git's common dir; without, the row is it.
      const gitDir = input.checkout ? await commonGitDir(materialized) : materialized;
      const repository = gitDir ?? materialized;
      const rev = gitDir === null ? 'HEAD' : worktree.commit;
      // A use_patch tree is the bug: its fix, what the agent must localize, is the patch reversed.
      const usePatch = sample.bugPatch !== null;
      const goldPatch = usePatch ? await fixPatchOf(repository, rev) : patches.get(sample.instanceId);
      const { truth, error } = await sampleGroundTruth(goldPatch, fileChanges.get(sample.instanceId), repository, summary, {
        filesFromLabels: usePatch,
        missingPatch: usePatch ? `no fix: git diff ${rev} ${rev}~1 failed in ${repository}` : undefined,
        rev,
      });
      rows.push({
        ...sample,
        baseCommit: worktree.commit,
        patchedFrom: worktree.patchedFrom,
        ...groundTruthToColumns(truth),
        worktreePath: input.checkout ? materialized : null,
        gitDir,
        groundTruthError: error,
      });
      const done = summary.samples - withoutWorktree;
      progress.report({
        stage: 'ground-truth',
        done,
        total: samples.length,
        unit: 'samples',
        counts: { derived: summary.withGroundTruth },
      });
    }
  } finally {
    progress.close();
  }
  const out = await writeParquetArtifact({ path: outPath, arrowSchema: environmentSamplesArrowSchema, rows, ...expectation });
  await progress.flush();
  log.info('ground truth: done', { ...summary });
  return { samples: out, summary, cached: false };
}

import { readArtifactRows, readRows } from '../artifacts';
import { git } from '../worktrees/git';
import type { GroundTruthSummary } from '../../schemas/environment';
import { groundTruthToColumns } from '../../schemas/ground-truth';
import { SampleSchema, type Sample } from '../../schemas/samples';
import { treeKey, WorktreeResultSchema, type WorktreeResult } from '../../schemas/worktrees';
import { fixPatchOf, sampleGroundTruth } from './sample-ground-truth';

/**
 * The environment stage's samples rows (schemas/environment.ts): each sample whose commit was materialized, with
 * its tree and the ground truth of its gold patch, which the sample itself carries (no instances file is read).
 */

/** The worktrees artifact's usable rows (every status but failed), by their tree's key. */
export async function usableWorktrees(worktreesUri: string): Promise<Map<string, WorktreeResult>> {
  const byTree = new Map<string, WorktreeResult>();
  for await (const record of readRows(worktreesUri)) {
    if ('error' in record) continue;
    const row = WorktreeResultSchema.parse(record.row);
    if (row.status !== 'failed') byTree.set(treeKey(row), row);
  }
  return byTree;
}

/**
 * The samples that have a worktree, in file order, and how many have none. A sample whose commit could not be
 * materialized was dropped by the worktrees step (onUnavailable: skip, listed in environment/dropped.parquet
 * with its reason): the later stages see only the rest.
 */
export async function samplesWithWorktree(
  samplesUri: string,
  worktrees: ReadonlyMap<string, WorktreeResult>,
): Promise<{ samples: Sample[]; withoutWorktree: number }> {
  const samples: Sample[] = [];
  let withoutWorktree = 0;
  for await (const sample of readArtifactRows(samplesUri, (row) => SampleSchema.parse(row), 'samples')) {
    if (worktrees.has(treeKey(sample))) samples.push(sample);
    else withoutWorktree++;
  }
  return { samples, withoutWorktree };
}

/**
 * The bare repository a worktree belongs to (null when git cannot tell: the pre-image is then read through the
 * worktree), asked of git once per worktree.
 */
function commonGitDirs(): (worktree: string) => Promise<string | null> {
  const found = new Map<string, Promise<string | null>>();
  return (worktree) => {
    let dir = found.get(worktree);
    if (!dir) {
      dir = git(['rev-parse', '--path-format=absolute', '--git-common-dir'], { cwd: worktree, timeoutMs: 60_000 }).then(
        (out) => out.trim(),
        () => null,
      );
      found.set(worktree, dir);
    }
    return dir;
  };
}

interface GroundTruthRowOptions {
  /** The worktrees rows are checkouts (true) or bare repositories holding the commit (false). */
  checkout: boolean;
  gitDirOf: (worktree: string) => Promise<string | null>;
  /** Counts every derived sample. */
  summary: GroundTruthSummary;
}

/** One environment samples row: the sample on its materialized tree, with its ground truth. */
async function groundTruthRow(sample: Sample, worktree: WorktreeResult, opts: GroundTruthRowOptions): Promise<Record<string, unknown>> {
  const materialized = worktree.path;
  // With checkouts the row is a worktree and its bare repository is git's common dir; without, the row is it.
  const gitDir = opts.checkout ? await opts.gitDirOf(materialized) : materialized;
  const repository = gitDir ?? materialized;
  const rev = gitDir === null ? 'HEAD' : worktree.commit;
  // A use_patch tree is the bug: its fix, what the agent must localize, is the patch reversed.
  const usePatch = sample.bugPatch !== null;
  const goldPatch = usePatch ? await fixPatchOf(repository, rev) : (sample.goldPatch ?? undefined);
  const { truth, error } = await sampleGroundTruth(goldPatch, sample.fileChangeTargets, repository, opts.summary, {
    filesFromLabels: usePatch,
    missingPatch: usePatch ? `no fix: git diff ${rev} ${rev}~1 failed in ${repository}` : undefined,
    rev,
  });
  return {
    ...sample,
    baseCommit: worktree.commit,
    patchedFrom: worktree.patchedFrom,
    ...groundTruthToColumns(truth),
    worktreePath: opts.checkout ? materialized : null,
    gitDir,
    groundTruthError: error,
  };
}

/**
 * The rows of `samples` (each has a worktree, see samplesWithWorktree), in order, each counted into
 * `opts.summary`; `onRow` hears how many are done after each one.
 */
export async function groundTruthRows(
  samples: readonly Sample[],
  worktrees: ReadonlyMap<string, WorktreeResult>,
  opts: Omit<GroundTruthRowOptions, 'gitDirOf'> & { onRow?: (done: number) => void },
): Promise<Record<string, unknown>[]> {
  const gitDirOf = commonGitDirs();
  const rows: Record<string, unknown>[] = [];
  for (const sample of samples) {
    opts.summary.samples++;
    rows.push(await groundTruthRow(sample, worktrees.get(treeKey(sample))!, { ...opts, gitDirOf }));
    opts.onRow?.(rows.length);
  }
  return rows;
}

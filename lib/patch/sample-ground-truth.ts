import { readRows } from '../artifacts';
import { git, runGit } from '../worktrees/git';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import type { GroundTruthSummary } from '../../schemas/environment';
import type { GroundTruth } from '../../schemas/ground-truth';
import { SAMPLES_WITH_GOLD_PATCH_VERSION, type SampleFileChangeTargets } from '../../schemas/samples';
import { groundTruthForPatch, type ReadPreImage } from './ground-truth';

/** A pre-image read is one `git cat-file`: a minute means git is stuck, not busy. */
const PRE_IMAGE_TIMEOUT_MS = 60_000;

const emptyTruth: GroundTruth = {
  files: [],
  lineRanges: [],
  changedLineRanges: [],
  modules: [],
  functions: [],
  newFiles: [],
  deletedFiles: [],
  preImageErrors: [],
};

/**
 * The pre-image of a repo-relative path at `rev` (a worktree's HEAD, or a commit of a bare repository), read from
 * git's object store (never through the filesystem, so a patch path such as `../x` cannot reach outside the
 * repository). null when absent.
 */
export function preImageReader(repository: string, rev = 'HEAD'): ReadPreImage {
  return (file) => git(['-C', repository, 'cat-file', 'blob', `${rev}:${file}`], { timeoutMs: PRE_IMAGE_TIMEOUT_MS }).catch(() => null);
}

/**
 * The fix of a use_patch tree (`rev` = head + bug patch, lib/worktrees/patched.ts): `git diff <rev> <rev>~1`,
 * the bug patch reversed, whose pre-image is the tree the agent searches. `repository` is its worktree (rev
 * HEAD) or its bare repository (rev the patched commit). Hardened: the tree comes from an outside repository.
 * undefined when git cannot produce it (the sample then says why it has no ground truth).
 */
export async function fixPatchOf(repository: string, rev = 'HEAD'): Promise<string | undefined> {
  const r = await runGit(['diff', '--no-color', '--no-ext-diff', '--no-textconv', '--no-renames', rev, `${rev}~1`], {
    cwd: repository,
    timeoutMs: PRE_IMAGE_TIMEOUT_MS,
    hardened: true,
  }).catch(() => undefined);
  return r !== undefined && r.code === 0 && r.stdout !== '' ? r.stdout : undefined;
}

/**
 * Why a samples artifact cannot give ground truth on its own, or null when it can: samples written before they
 * carried their gold patch (schema version 3) would need the instances file read again.
 */
export function samplesWithoutGoldPatchMessage(samples: ArtifactRef): string | null {
  if (samples.schemaVersion >= SAMPLES_WITH_GOLD_PATCH_VERSION) return null;
  return (
    `samples ${samples.uri} are schema version ${samples.schemaVersion}, written before samples carried their gold patch ` +
    `(version ${SAMPLES_WITH_GOLD_PATCH_VERSION}): run the catm stage again to write them`
  );
}

export function emptyGroundTruthSummary(): GroundTruthSummary {
  return {
    samples: 0,
    withGroundTruth: 0,
    withoutWorktree: 0,
    patchErrors: 0,
    preImageErrors: 0,
    files: 0,
    modules: 0,
    functions: 0,
    fromFileChanges: 0,
  };
}

/**
 * One sample's ground truth from its gold patch, counted into `summary`. A missing or malformed patch gives
 * empty ground truth and the error (the sample stays a row, so the evaluation can say why it skipped it).
 */
export async function sampleGroundTruth(
  patch: string | undefined,
  labelled: SampleFileChangeTargets | null | undefined,
  repository: string,
  summary: GroundTruthSummary,
  opts: { filesFromLabels?: boolean; missingPatch?: string; rev?: string } = {},
): Promise<{ truth: GroundTruth; error: string | null }> {
  if (!patch) {
    summary.patchErrors++;
    return { truth: emptyTruth, error: opts.missingPatch ?? 'no gold patch in the sample' };
  }
  try {
    let truth = await groundTruthForPatch(patch, preImageReader(repository, opts.rev ?? 'HEAD'));
    // CodeScout-layout instances carry their own module / function labels: those are the targets.
    if (labelled) {
      truth = { ...truth, modules: labelled.modules, functions: labelled.functions };
      // use_patch instances: CodeScout's `target` (= file_changes) is the ground truth at every level.
      if (opts.filesFromLabels && labelled.files.length > 0) truth = { ...truth, files: labelled.files };
      summary.fromFileChanges++;
    }
    summary.withGroundTruth++;
    summary.preImageErrors += truth.preImageErrors.length;
    summary.files += truth.files.length;
    summary.modules += truth.modules.length;
    summary.functions += truth.functions.length;
    return { truth, error: null };
  } catch (e) {
    summary.patchErrors++;
    return { truth: emptyTruth, error: `gold patch: ${(e as Error).message}` };
  }
}

/** The summary of a written ground-truth samples artifact (a cache hit reports what the run reported). */
export async function summarizeGroundTruthArtifact(uri: string): Promise<GroundTruthSummary> {
  const summary = emptyGroundTruthSummary();
  for await (const record of readRows(uri)) {
    if ('error' in record) continue;
    const row = record.row as Record<string, unknown>;
    const length = (column: string) => (Array.isArray(row[column]) ? (row[column] as unknown[]).length : 0);
    summary.samples++;
    const error = row.groundTruthError as string | null;
    if (error === null) summary.withGroundTruth++;
    else summary.patchErrors++;
    summary.preImageErrors += length('gold_pre_image_errors');
    summary.files += length('gold_files');
    summary.modules += length('gold_modules');
    summary.functions += length('gold_functions');
  }
  return summary;
}

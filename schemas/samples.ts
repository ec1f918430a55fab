import { z } from 'zod';
import { bool, columns, float64, int32, list, nullable, nullish, struct, utf8 } from './columns';
import { JudgeVerdictSchema } from './judge';

/**
 * CATM stage 3 output (CodeGrep §3.4): weighted labels, and the training/evaluation samples that merge them
 * with the gold patch, G(x) = Gpatch(x) ∪ {f ∈ L(x) : w_f ≥ 0.15}.
 */

/**
 * One weighted CATM label: a mined candidate that passed the reasoning-length filter and was kept by the judge
 * (every verdict but NOT_RELEVANT), with its weights. `retained` says whether it enters G(x).
 */
export const catmLabelColumns = columns({
  instanceId: utf8(z.string().min(1)),
  trajectoryId: utf8(z.string().min(1)),
  repo: utf8(z.string().min(1)),
  /** Repository-relative path. */
  path: utf8(z.string().min(1)),
  /** l(f), Qwen3 tokens of the post-reasoning. */
  postReasoningTokens: int32(z.number().int().nonnegative()),
  verdict: utf8(JudgeVerdictSchema),
  /** w̃(f), Eq. 1. */
  unnormalizedWeight: float64(z.number().min(0).max(1)),
  /** w(f) = w̃(f)/µraw, Eq. 2. */
  weight: float64(z.number().nonnegative()),
  /** w(f) ≥ 0.15. */
  retained: bool(),
});
export const CatmLabelSchema = catmLabelColumns.zod;
export type CatmLabel = z.infer<typeof CatmLabelSchema>;

export const CATM_LABELS_SCHEMA_NAME = 'catm.labels';
export const CATM_LABELS_SCHEMA_VERSION = 1;

export const catmLabelsArrowSchema = catmLabelColumns.arrowSchema();

/** A retained CATM file of a sample: the strongest label for that path over the instance's trajectories. */
const catmFileColumns = {
  path: utf8(z.string().min(1)),
  weight: float64(z.number().nonnegative()),
  trajectoryId: utf8(z.string().min(1)),
  postReasoningTokens: int32(z.number().int().nonnegative()),
  verdict: utf8(JudgeVerdictSchema),
};
export const CatmFileSchema = columns(catmFileColumns).zod;
export type CatmFile = z.infer<typeof CatmFileSchema>;

/** The targets CodeScout's `file_changes` name at each level: changed files, classes, functions. */
const fileChangeTargetColumns = { files: list(utf8()), modules: list(utf8()), functions: list(utf8()) };

export const sampleColumns = columns({
  instanceId: utf8(z.string().min(1)),
  /** `owner/name`. */
  repo: utf8(z.string().min(1)),
  /** The instance's base commit; null for a `use_patch` instance, whose tree is the repository head + `bugPatch`. */
  baseCommit: nullable(utf8(z.string().regex(/^[0-9a-f]{40}$/))),
  problemStatement: utf8(),
  /**
   * CodeScout's SWE-Smith instances (`use_patch: true`): the patch applied to the repository head to make the
   * buggy tree the agent searches; null for SWE-bench-style instances, whose tree is `baseCommit` itself.
   */
  bugPatch: nullable(utf8()),
  /** sha256 (hex) of `bugPatch`: with the repository and its head, the identity of the buggy tree. */
  bugPatchSha256: nullable(utf8(z.string().regex(/^[0-9a-f]{64}$/))),
  /** Files the gold patch changes (a/ b/ stripped, pre-image path for renames), in patch order. */
  goldFiles: list(utf8()),
  /** Retained CATM files, weight descending, then path. May include gold files. */
  catmFiles: list(struct(catmFileColumns, CatmFileSchema)),
  /** G(x): goldFiles, then the CATM files not already gold, in catmFiles order; no repeats. */
  targetFiles: list(utf8()),
  /**
   * The instance's gold patch, which the environment stage derives ground truth from, so that no later stage
   * reads the instances file again; null for a `use_patch` sample (its `bugPatch` is the instance's patch, and
   * its fix is taken from its tree). Absent in samples written before schema version 3.
   */
  goldPatch: nullish(utf8()),
  /**
   * CodeScout's `file_changes` as localization targets (lib/patch/codescout-layout.ts); null when the instance
   * has none. Absent in samples written before schema version 3.
   */
  fileChangeTargets: nullish(struct(fileChangeTargetColumns)),
});
export const SampleSchema = sampleColumns.zod;
export type Sample = z.infer<typeof SampleSchema>;
export type SampleFileChangeTargets = NonNullable<Sample['fileChangeTargets']>;

export const SAMPLES_SCHEMA_NAME = 'catm.samples';
/**
 * 2: `baseCommit` nullable, `bugPatch` and `bugPatchSha256` (CodeScout's `use_patch` instances).
 * 3: `goldPatch` and `fileChangeTargets` (what ground truth needs of the instance).
 */
export const SAMPLES_SCHEMA_VERSION = 3;
/** The first version whose samples carry `goldPatch` and `fileChangeTargets`. */
export const SAMPLES_WITH_GOLD_PATCH_VERSION = 3;

export const samplesArrowSchema = sampleColumns.arrowSchema();

/** Why an instance row produced no sample. */
export const INSTANCE_SKIP_REASONS = [
  'malformedRow',
  'missingOrInvalid:instance_id',
  'missingOrInvalid:repo',
  'missingOrInvalid:base_commit',
  'missingOrInvalid:problem_statement',
  'missingOrInvalid:patch',
  'missingOrInvalid:file_changes',
  'missingOrInvalid:use_patch',
  'missingOrInvalid:prompt',
  'duplicateInstanceId',
  'unparseablePatch',
] as const;
export type InstanceSkipReason = (typeof INSTANCE_SKIP_REASONS)[number];

/**
 * Counts of one samples pass. They add up:
 *   instancesRead = samplesWritten + Σ instancesSkipped
 *   labelsRead    = labelsRetained + labelsNotRetained
 *   labelsRetained = labelsUsed + labelsRepoMismatch + labelsWithoutInstance
 */
export const SamplesSummarySchema = z.object({
  instancesRead: z.number().int().nonnegative(),
  instancesSkipped: z.object(
    Object.fromEntries(INSTANCE_SKIP_REASONS.map((r) => [r, z.number().int().nonnegative()])) as {
      [K in InstanceSkipReason]: z.ZodNumber;
    },
  ),
  samplesWritten: z.number().int().nonnegative(),
  /** Samples with at least one retained CATM file. */
  samplesWithCatm: z.number().int().nonnegative(),
  /** Target files that CATM added beyond the gold files, over all samples. */
  catmOnlyTargets: z.number().int().nonnegative(),
  labelsRead: z.number().int().nonnegative(),
  labelsRetained: z.number().int().nonnegative(),
  labelsNotRetained: z.number().int().nonnegative(),
  /** Retained labels that went into a sample (several may collapse into one catmFiles entry per path). */
  labelsUsed: z.number().int().nonnegative(),
  /** Retained labels whose repo differs from their instance's. */
  labelsRepoMismatch: z.number().int().nonnegative(),
  /** Retained labels whose instance id is not in the instances input (or only in a skipped row). */
  labelsWithoutInstance: z.number().int().nonnegative(),
  examples: z.array(z.object({ ordinal: z.number().int().nullable(), reason: z.string(), detail: z.string() })),
});
export type SamplesSummary = z.infer<typeof SamplesSummarySchema>;

import * as arrow from 'apache-arrow';
import { z } from 'zod';
import { JudgeVerdictSchema } from './judge';

/**
 * CATM stage 3 output (CodeGrep §3.4): weighted labels, and the training/evaluation samples that merge them
 * with the gold patch, G(x) = Gpatch(x) ∪ {f ∈ L(x) : w_f ≥ 0.15}.
 */

/**
 * One weighted CATM label: a mined candidate that passed the reasoning-length filter and was kept by the judge
 * (every verdict but NOT_RELEVANT), with its weights. `retained` says whether it enters G(x).
 */
export const CatmLabelSchema = z.object({
  instanceId: z.string().min(1),
  trajectoryId: z.string().min(1),
  repo: z.string().min(1),
  /** Repository-relative path. */
  path: z.string().min(1),
  /** l(f), Qwen3 tokens of the post-reasoning. */
  postReasoningTokens: z.number().int().nonnegative(),
  verdict: JudgeVerdictSchema,
  /** w̃(f), Eq. 1. */
  unnormalizedWeight: z.number().min(0).max(1),
  /** w(f) = w̃(f)/µraw, Eq. 2. */
  weight: z.number().nonnegative(),
  /** w(f) ≥ 0.15. */
  retained: z.boolean(),
});
export type CatmLabel = z.infer<typeof CatmLabelSchema>;

export const CATM_LABELS_SCHEMA_NAME = 'catm.labels';
export const CATM_LABELS_SCHEMA_VERSION = 1;

export const catmLabelsArrowSchema = new arrow.Schema([
  new arrow.Field('instanceId', new arrow.Utf8(), false),
  new arrow.Field('trajectoryId', new arrow.Utf8(), false),
  new arrow.Field('repo', new arrow.Utf8(), false),
  new arrow.Field('path', new arrow.Utf8(), false),
  new arrow.Field('postReasoningTokens', new arrow.Int32(), false),
  new arrow.Field('verdict', new arrow.Utf8(), false),
  new arrow.Field('unnormalizedWeight', new arrow.Float64(), false),
  new arrow.Field('weight', new arrow.Float64(), false),
  new arrow.Field('retained', new arrow.Bool(), false),
]);

/** A retained CATM file of a sample: the strongest label for that path over the instance's trajectories. */
export const CatmFileSchema = z.object({
  path: z.string().min(1),
  weight: z.number().nonnegative(),
  trajectoryId: z.string().min(1),
  postReasoningTokens: z.number().int().nonnegative(),
  verdict: JudgeVerdictSchema,
});
export type CatmFile = z.infer<typeof CatmFileSchema>;

export const SampleSchema = z.object({
  instanceId: z.string().min(1),
  /** `owner/name`. */
  repo: z.string().min(1),
  baseCommit: z.string().regex(/^[0-9a-f]{40}$/),
  problemStatement: z.string(),
  /** Files the gold patch changes (a/ b/ stripped, pre-image path for renames), in patch order. */
  goldFiles: z.array(z.string()),
  /** Retained CATM files, weight descending, then path. May include gold files. */
  catmFiles: z.array(CatmFileSchema),
  /** G(x): goldFiles, then the CATM files not already gold, in catmFiles order; no repeats. */
  targetFiles: z.array(z.string()),
});
export type Sample = z.infer<typeof SampleSchema>;

export const SAMPLES_SCHEMA_NAME = 'catm.samples';
export const SAMPLES_SCHEMA_VERSION = 1;

const utf8List = () => new arrow.List(new arrow.Field('item', new arrow.Utf8(), false));

export const samplesArrowSchema = new arrow.Schema([
  new arrow.Field('instanceId', new arrow.Utf8(), false),
  new arrow.Field('repo', new arrow.Utf8(), false),
  new arrow.Field('baseCommit', new arrow.Utf8(), false),
  new arrow.Field('problemStatement', new arrow.Utf8(), false),
  new arrow.Field('goldFiles', utf8List(), false),
  new arrow.Field(
    'catmFiles',
    new arrow.List(
      new arrow.Field(
        'item',
        new arrow.Struct([
          new arrow.Field('path', new arrow.Utf8(), false),
          new arrow.Field('weight', new arrow.Float64(), false),
          new arrow.Field('trajectoryId', new arrow.Utf8(), false),
          new arrow.Field('postReasoningTokens', new arrow.Int32(), false),
          new arrow.Field('verdict', new arrow.Utf8(), false),
        ]),
        false,
      ),
    ),
    false,
  ),
  new arrow.Field('targetFiles', utf8List(), false),
]);

/** Why an instance row produced no sample. */
export const INSTANCE_SKIP_REASONS = [
  'malformedRow',
  'missingOrInvalid:instance_id',
  'missingOrInvalid:repo',
  'missingOrInvalid:base_commit',
  'missingOrInvalid:problem_statement',
  'missingOrInvalid:patch',
  'missingOrInvalid:file_changes',
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

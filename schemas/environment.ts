import { z } from 'zod';
import { ArtifactRefSchema } from './artifact-ref';
import { EnvironmentConfigSchema, type EnvironmentConfig, type PipelineStage } from './config';
import { columns, nullable, utf8 } from './columns';
import { groundTruthColumns, GROUND_TRUTH_SCHEMA_VERSION } from './ground-truth';
import { SAMPLES_SCHEMA_NAME, SAMPLES_SCHEMA_VERSION, sampleColumns } from './samples';

/**
 * The environment stage (CodeGrep §3.3, App. A): worktrees per (repo, commit), and the samples artifact
 * with ground truth at file, line-range, class and function level (CodeScout §3.1) — the CATM samples'
 * columns plus the ground-truth columns and the sample's worktree, hence a new schema version.
 */
export const ENVIRONMENT_SAMPLES_SCHEMA_NAME = SAMPLES_SCHEMA_NAME;
/** 3: from CATM samples version 2; 4: from version 3 (`goldPatch`, `fileChangeTargets`). */
export const ENVIRONMENT_SAMPLES_SCHEMA_VERSION = SAMPLES_SCHEMA_VERSION + 1;

export const environmentSampleColumns = columns({
  ...sampleColumns.shape,
  /**
   * The commit of the tree the agent searches: the instance's base commit, or for a use_patch sample the
   * patched commit (its repository head + `bugPatch`, lib/worktrees/patched.ts); never null here.
   */
  baseCommit: utf8(z.string().regex(/^[0-9a-f]{40}$/)),
  /** use_patch samples: the head `bugPatch` was applied to (the fixed tree); null otherwise. */
  patchedFrom: nullable(utf8()),
  ...groundTruthColumns.shape,
  worktreePath: nullable(utf8()),
  /** The repository's bare clone, where BM25 and dense read the commit's files (no checkout needed). */
  gitDir: nullable(utf8()),
  /** Null when ground truth was derived; otherwise why it could not be (no worktree, unparseable patch). */
  groundTruthError: nullable(utf8()),
});
export const environmentSamplesArrowSchema = environmentSampleColumns.arrowSchema();
export { GROUND_TRUTH_SCHEMA_VERSION };

/**
 * Whether the environment stage makes a worktree per commit. Training (the agent's tools), downstream injection
 * and an agent retriever work in a checkout; BM25 and dense read the commit from the bare repository
 * (lib/retrievers/bm25/commit-index.ts). With `worktrees: auto` a run that goes on to an evaluation of BM25 and
 * dense retrievers only, with no training or downstream stage, makes none; a run whose later stages are not
 * named (an environment-only run, whose samples another run may train on) keeps making them.
 */
export function checkoutsNeeded(config: {
  stages: readonly PipelineStage[];
  environment: Pick<EnvironmentConfig, 'worktrees'>;
  evaluation?: { retrievers: readonly { kind: string }[] };
}): boolean {
  if (config.environment.worktrees === 'always') return true;
  if (!config.stages.includes('evaluation') || config.stages.includes('training') || config.stages.includes('downstream')) return true;
  return (config.evaluation?.retrievers ?? []).some((r) => r.kind === 'agent');
}

const stageBase = {
  runId: z.string(),
  runDir: z.string(),
};

export const MaterializeInputSchema = z.object({
  ...stageBase,
  samples: ArtifactRefSchema,
  environment: EnvironmentConfigSchema.extend({ cacheDir: z.string(), worktreesDir: z.string() }),
  /** Make a worktree per commit (false: only make sure the bare repository holds the commit). */
  checkout: z.boolean().default(true),
});
export type MaterializeInput = z.input<typeof MaterializeInputSchema>;

/** At most this many dropped samples are listed in the summary (workflow history); the Parquet table has all. */
export const DROPPED_LISTED = 200;

export const DROPPED_SCHEMA_NAME = 'environment-dropped';
export const DROPPED_SCHEMA_VERSION = 1;
/** One sample the environment stage dropped: its commit could not be materialized, and why. */
export const droppedSampleColumns = columns({ instanceId: utf8(), repo: utf8(), commit: utf8(), reason: utf8() });
export const droppedArrowSchema = droppedSampleColumns.arrowSchema({
  schemaName: DROPPED_SCHEMA_NAME,
  schemaVersion: String(DROPPED_SCHEMA_VERSION),
});
export type DroppedSample = z.infer<typeof droppedSampleColumns.zod>;

/** The disk this run's own trees take (the shared folders' figures are the summary's bareBytes … savedRatio). */
export const RunDiskSchema = z.object({
  /** Distinct worktrees this run materialized or reused. */
  worktrees: z.number().int(),
  /** Their checkouts' bytes (measured when each was made). */
  worktreeBytes: z.number(),
  /** Repositories of those worktrees. */
  repos: z.number().int(),
  /** Their bare repositories' bytes: the whole object store of each, which other runs' commits share. */
  bareBytes: z.number(),
});
export type RunDisk = z.infer<typeof RunDiskSchema>;

/** `environment.maxWorktreeBytes` at work in this stage: what it removed, and whether held worktrees alone exceed it. */
export const BudgetSummarySchema = z.object({
  maxBytes: z.number(),
  removedWorktrees: z.number().int(),
  removedBytes: z.number(),
  /** worktreesDir's checkouts after the last check. */
  bytesAfter: z.number(),
  overBudget: z.boolean(),
});
export type BudgetSummary = z.infer<typeof BudgetSummarySchema>;

export const MaterializeSummarySchema = z.object({
  commits: z.number().int(),
  created: z.number().int(),
  reused: z.number().int(),
  repaired: z.number().int(),
  failed: z.number().int(),
  repos: z.number().int(),
  medianMs: z.number().nullable(),
  /** This run's own disk use; absent in summaries written before it was reported. */
  run: RunDiskSchema.optional(),
  /** The disk budget, when `environment.maxWorktreeBytes` is set. */
  budget: BudgetSummarySchema.nullable().optional(),
  /** The shared folders (every run's bare clones in cacheDir, every worktree in worktreesDir), from here to savedRatio. */
  bareBytes: z.number(),
  worktreeBytes: z.number(),
  estimatedFullClonesBytes: z.number(),
  savedRatio: z.number().nullable(),
  /** Failures that no retry can fix (unreachable repository, missing commit), one line each. */
  unreachable: z.array(z.string()),
  onUnavailable: z.enum(['skip', 'fail']),
  /** Samples dropped because their commit could not be materialized (`onUnavailable: skip`). */
  droppedSamples: z.number().int(),
  /** The dropped samples with their reason (the first DROPPED_LISTED; all of them are in environment/dropped.parquet). */
  dropped: z.array(droppedSampleColumns.zod),
});
export type MaterializeSummary = z.infer<typeof MaterializeSummarySchema>;

export const MaterializeOutputSchema = z.object({
  worktrees: ArtifactRefSchema,
  /** environment/dropped.parquet; null with `onUnavailable: fail` (nothing is ever dropped then). */
  dropped: ArtifactRefSchema.nullable(),
  summary: MaterializeSummarySchema,
});

export type MaterializeOutput = z.infer<typeof MaterializeOutputSchema>;

export const GroundTruthInputSchema = z.object({
  ...stageBase,
  samples: ArtifactRefSchema,
  worktrees: ArtifactRefSchema,
  /** The worktrees rows are checkouts (true) or bare repositories holding the commit (false). */
  checkout: z.boolean().default(true),
});
export type GroundTruthInput = z.input<typeof GroundTruthInputSchema>;

export const GroundTruthSummarySchema = z.object({
  samples: z.number().int(),
  withGroundTruth: z.number().int(),
  withoutWorktree: z.number().int(),
  patchErrors: z.number().int(),
  preImageErrors: z.number().int(),
  files: z.number().int(),
  modules: z.number().int(),
  functions: z.number().int(),
  /** Samples whose modules and functions come from the instance's CodeScout `file_changes` labels. */
  fromFileChanges: z.number().int().default(0),
});
export type GroundTruthSummary = z.infer<typeof GroundTruthSummarySchema>;

export const GroundTruthOutputSchema = z.object({ samples: ArtifactRefSchema, summary: GroundTruthSummarySchema, cached: z.boolean() });
export type GroundTruthOutput = z.infer<typeof GroundTruthOutputSchema>;

export const EnvironmentResultSchema = z.object({
  worktrees: ArtifactRefSchema,
  dropped: ArtifactRefSchema.nullable(),
  samples: ArtifactRefSchema,
  materialize: MaterializeSummarySchema,
  groundTruth: GroundTruthSummarySchema,
});
export type EnvironmentResult = z.infer<typeof EnvironmentResultSchema>;

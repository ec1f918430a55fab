/**
 * Where the artifacts one stage hands to another live in a run directory (`<dataDir>/<runId>/`), as POSIX paths
 * relative to it: the one list the writers (activities), the readers (workflows' `findRunArtifact`, the store
 * keys) and the CLI share. Pure strings, no `node:path`: workflow code imports it (ARCHITECTURE.md).
 * The stage folders' other files are each stage's own business (e.g. lib/training/layout.ts).
 */
export const RUN_ARTIFACTS = {
  /** CATM's labelled samples (activities/catm-weight.ts), the environment stage's input. */
  catmSamples: 'catm/samples.parquet',
  /** The environment stage's samples with ground truth (activities/environment-ground-truth.ts). */
  environmentSamples: 'environment/samples.parquet',
  /** The trainer's complete checkpoints, `step-NNNNNNNN/` each (lib/training/layout.ts). */
  trainingCheckpoints: 'training/trainer/checkpoints',
} as const;

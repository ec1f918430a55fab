// RFT, the warm start of training by rejection-sampling fine-tuning (CodeScout §4.1): sampling a teacher through the
// agent loop, keeping the perfect rollouts, fine-tuning the student with trainer.sft. Domain code for activities/rft*.ts.
export { answerLevelF1, isKept, keepThresholds, presetKeepThresholds, type KeepThresholds, type LevelF1 } from './keep';
export { RftPlanError, planRft, planRftInstanceIds } from './plan';
export {
  rftLayout,
  rftLimits,
  rftShardCount,
  rftShardInstances,
  sampleRftShard,
  sampleRollout,
  type RftSamplingOptions,
} from './sample-shard';
export { collectRft, readRftRows, readSftTokens, sftExampleLine, writeRftTrajectories } from './collect';
export {
  runSft,
  sftCheckpoints,
  sftLayout,
  sftStepRows,
  sftTrainerConfig,
  SftCancelledError,
  SftConfigError,
  SftExitError,
  type SftContext,
  type SftRunInput,
  type SftRunResult,
} from './sft';

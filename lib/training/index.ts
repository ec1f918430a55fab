// Training runs on disk and the trainer's contract: pure domain code for activities/training*.ts.
export { attemptFiles, listSegments, nextAttemptNumber, segmentDir, segmentMetricsPath, trainingLayout } from './layout';
export { newestCheckpoint } from './checkpoints';
export { TrainerProtocolError, latestStepMetrics, stepLineToMetricsRow, stepRowFromLine } from './step-lines';
export { missingSteps, newestPerStep, readSegmentLogRows, runMetricsRows } from './run-metrics';
export { rolloutEngines, segmentTrainerStarts } from './trainer-starts';
export { applyTrainerEvent, initialSegmentState, type SegmentState, type TrainerEventOutcome, type TrainerLine } from './trainer-events';
export { SegmentProgress } from './segment-progress';
export { environmentLimits, trainerArgs, trainerConfig } from './trainer-config';
export { isRecordAlive, reapStaleTrainer, removePidFile, writePidFile, type TrainerPidRecord } from './trainer-pid-file';
export {
  SMOKE_BANNER,
  effectiveRecipeRows,
  summarizeTraining,
  trainingReportHtml,
  trainingReportMarkdown,
  type TrainingSummary,
} from './report';
export { segmentResult, segmentStoppedBy, trainerFailure, trainingNodeProblem, type SegmentResultFields } from './segment-outcome';
export { writeSegmentMetrics } from './segment-metrics';
export { runTrainer, TrainerStartError, type TrainerRun, type TrainerStopReason } from './run-trainer';
export { NoTrainableSamplesError, setUpSegment, type SegmentSetup } from './segment-setup';
export {
  inspectRun,
  runTrainingSegment,
  SegmentCancelledError,
  SegmentConfigError,
  TrainerExitError,
  TrainerUnkillableError,
  type SegmentContext,
  type SegmentLog,
} from './run-segment';

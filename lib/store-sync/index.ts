export { localCheckpoints, localTraining, newestLocalCheckpoint, storeTraining, stepDirName, segmentName } from './layout';
export { nodeDataDir, runDirOnNode } from './node-data-dir';
export { publishRunArtifact } from './publish';
export {
  SegmentMirror,
  inspectStoredRun,
  loggedSteps,
  openSegmentMirror,
  pullTrainingRecords,
  storedCheckpointSteps,
  storedSegments,
  type PullResult,
  type PushRoundTraffic,
  type SegmentMirrorOptions,
} from './run-mirror';
export { materializeSampleWorktrees, type NodeWorktrees } from './worktrees';
export {
  FencedWriterError,
  FenceEntrySchema,
  FencingTokenSchema,
  LeaseHeldByNewerAttemptError,
  RunLease,
  isNewerToken,
  newestFenceEntry,
  type FenceEntry,
  type FencingToken,
} from './fencing';
export { logPartKey, readLogParts, usableLogParts, type AssembledLog, type LogPart } from './log-parts';
export { TRAINER_DEFAULT_KEEP_CHECKPOINTS, checkpointsToDelete, deleteStoredCheckpoint, type RetentionPolicy } from './retention';

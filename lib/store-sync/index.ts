export { localCheckpoints, localTraining, newestLocalCheckpoint, storeTraining, stepDirName, segmentName } from './layout';
export { nodeDataDir, nodeRunDir, setNodeDataDir } from './node-data-dir';
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
  type SegmentMirrorOptions,
} from './run-mirror';
export { materializeSampleWorktrees, type NodeWorktrees } from './worktrees';

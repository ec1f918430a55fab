import path from 'node:path';
import type { SegmentStore } from '../../schemas/store';
import { openArtifactStore, type StoreSettings } from '../artifacts/store';
import * as storeSync from '../store-sync';
import { segmentMetricsPath } from './layout';
import { writeSegmentMetrics } from './segment-metrics';

type MetricsInput = Parameters<typeof writeSegmentMetrics>[0];
type WrittenMetrics = Awaited<ReturnType<typeof writeSegmentMetrics>>;

/**
 * Where a training segment's run state lives (docs/design.md "Training"; README "Deployment: several machines"):
 *
 * - on the shared disk (`localSegmentStorage`): the segment trains in the run's own directory, which every node
 *   sees; the environment stage's worktrees serve the samples, and the result names local paths;
 * - in the run store (`storeSegmentStorage`): the node trains in its own run dir (`<nodeDataDir>/<runId>`, the
 *   data dir the worker read at start: activities/kit/deps.ts),
 *   makes the samples' worktrees itself, pulls the store's newest checkpoint and this segment's earlier logs
 *   first, pushes each checkpoint as the trainer reports it, and the result names the store's copies.
 *
 * runTrainingSegment (run-segment.ts) asks this interface and never which of the two it has.
 */
export interface SegmentStorage {
  /** The run directory the segment trains in, on this node's disk. */
  readonly runDir: string;
  /** Brings the run's state onto this node before the segment resumes; what was pulled (to log), or null when nothing is to pull. */
  pull(): Promise<storeSync.PullResult | null>;
  /** Where the result says a checkpoint is: its local path, or the store's URI. */
  checkpointRef(found: { step: number; path: string } | null): string | null;
  /** Writes the segment's metrics up to `upTo`, and returns the artifact the result names. */
  segmentMetrics(input: MetricsInput, upTo: number): Promise<WrittenMetrics>;
  /** This node's own worktrees of the samples, or null when the environment stage's (in the samples rows) serve. */
  sampleWorktrees(samplesUri: string, signal: AbortSignal): Promise<storeSync.NodeWorktrees | null>;
  /** The trainer reported a step: the checkpoint that step covers may be saved now. */
  stepReported(): void;
  /** The trainer has exited: the last logs and checkpoint are saved. */
  finish(): Promise<void>;
}

/** The run's directory on the shared disk holds everything: nothing to pull, push or publish. */
export function localSegmentStorage(runDir: string): SegmentStorage {
  return {
    runDir,
    pull: () => Promise.resolve(null),
    checkpointRef: (found) => found?.path ?? null,
    segmentMetrics: (input, upTo) => writeSegmentMetrics(input, upTo),
    sampleWorktrees: () => Promise.resolve(null),
    stepReported: () => {},
    finish: () => Promise.resolve(),
  };
}

export interface StoreSegmentOptions {
  store: SegmentStore;
  runId: string;
  /** The run directory the input names (on the CPU worker's disk); this node's own is derived from its run id. */
  runDir: string;
  /** This node's data dir (the worker's CODEGREP_DATA_DIR, read once at start); null: the node trains in `runDir`. */
  nodeDataDir: string | null;
  /** How this node reaches the store and where it caches (the worker's, read once at start). */
  storeSettings: StoreSettings;
  segment: number;
  attempt: number;
  startedAt: number;
  keepCheckpoints?: number;
  /** A background push failed (the next round retries it). */
  onPushError: (error: unknown) => void;
}

/** The run store holds the run's state; this node mirrors it in its own run directory (lib/store-sync). */
export async function storeSegmentStorage(options: StoreSegmentOptions): Promise<SegmentStorage> {
  const mirror = await storeSync.openSegmentMirror({
    store: openArtifactStore(options.store.uri, options.storeSettings.s3),
    runId: options.runId,
    segment: options.segment,
    attempt: options.attempt,
    startedAt: options.startedAt,
    keepCheckpoints: options.keepCheckpoints,
    localRunDir: storeSync.runDirOnNode(options.runDir, options.runId, options.nodeDataDir),
    onPushError: options.onPushError,
  });
  const runDir = mirror.localRunDir;
  return {
    runDir,
    pull: () => mirror.pull(),
    checkpointRef: (found) => mirror.checkpointUri(found?.step ?? null),
    segmentMetrics: async (input, upTo) => {
      const written = await writeSegmentMetrics(input, upTo);
      await mirror.flush();
      return { ref: await mirror.publishSegmentMetrics(segmentMetricsPath(input.runDir, input.segment)), rows: written.rows };
    },
    sampleWorktrees: (samplesUri, signal) =>
      storeSync.materializeSampleWorktrees(samplesUri, {
        repoSource: options.store.repoSource,
        dataDir: options.nodeDataDir ?? path.dirname(runDir),
        storeSettings: options.storeSettings,
        signal,
      }),
    // A step line covers its checkpoint: the checkpoint's marker may go up now.
    stepReported: () => mirror.notify(),
    finish: () => mirror.flush(),
  };
}

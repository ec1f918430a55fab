import { existsSync, readdirSync, statSync } from 'node:fs';
import { mkdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import { readManifest } from '../artifacts/manifest';
import { openArtifactStore, publishArtifact, pullDirectory, pushDirectory, type ArtifactStore } from '../artifacts/store';
import { localCheckpoints, localTraining, newestLocalCheckpoint, segmentName, stepDirName, storeTraining } from './layout';

/**
 * A training segment's run directory mirrored through the artifact store (issue #13), so a GPU node shares
 * nothing with the CPU nodes or with the GPU node that ran an earlier attempt:
 *
 * - `pull()` before the trainer starts: the store's newest complete checkpoint when it is newer than the
 *   newest local one, and the segment's earlier attempt logs where the store's copy is longer than the local
 *   one (logs only grow), plus the trainer's recipe.json.
 * - `notify()` as the trainer reports steps and checkpoints: a push round in the background (rounds never
 *   overlap; notifications during a round coalesce into one more round). A round snapshots the segment's
 *   logs, uploads the changed ones, then the files of the newest local checkpoint whose step those logs
 *   cover, then that checkpoint's marker last. So a marker exists only once the logs of every step up
 *   to it are in the store: a retry that resumes from it finds the metrics rows of those steps there.
 * - `flush()` after the trainer exited: waits for the running round and pushes once more; throws the round's
 *   error (the attempt then fails and is retried, rather than report a checkpoint the store does not have).
 * - `publishSegmentMetrics()`: the segment's metrics Parquet (and manifest) to the store; returns its s3 ref.
 */
export interface SegmentMirrorOptions {
  store: string | ArtifactStore;
  runId: string;
  /** The node-local run directory this segment works in. */
  localRunDir: string;
  segment: number;
  /** Reports a background push that failed (it is retried by the next round). */
  onPushError?: (error: unknown) => void;
}

export interface PullResult {
  /** The checkpoint step pulled from the store, or null when the local one was as new (or there is none). */
  checkpointStep: number | null;
  /** Log files downloaded (relative to the segment's folder). */
  logs: string[];
}

/** The step values the trainer's stdout records (step lines, and the step of resumed/stopped/done lines). */
export function loggedSteps(stdout: string): number {
  let max = 0;
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{') || !line.endsWith('}')) continue;
    try {
      const value = JSON.parse(line) as { event?: unknown; step?: unknown };
      if (typeof value.step === 'number' && ['step', 'resumed', 'stopped', 'done'].includes(String(value.event)))
        max = Math.max(max, value.step);
    } catch {
      // a partial or foreign line
    }
  }
  return max;
}

/** Checkpoint steps that have a marker in the store, ascending. */
export async function storedCheckpointSteps(store: ArtifactStore, runId: string): Promise<number[]> {
  const keys = storeTraining(runId);
  return (await store.list(keys.markers))
    .map((o) => /\/step-(\d+)\.json$/.exec(o.key))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
}

/** Segment numbers with logs or a metrics file in the store, ascending. */
export async function storedSegments(store: ArtifactStore, runId: string): Promise<number[]> {
  const keys = storeTraining(runId);
  const found = new Set<number>();
  for (const object of [...(await store.list(keys.segments)), ...(await store.list(keys.metrics))]) {
    const match = /\/segment-(\d+)(\/|\.parquet$)/.exec(object.key);
    if (match) found.add(Number(match[1]));
  }
  return [...found].sort((a, b) => a - b);
}

/** What the store holds of a training run: where a new training workflow continues from (inspectTrainingRun). */
export async function inspectStoredRun(
  storeOrUri: string | ArtifactStore,
  runId: string,
): Promise<{ checkpointStep: number | null; checkpoint: string | null; lastSegment: number }> {
  const store = typeof storeOrUri === 'string' ? openArtifactStore(storeOrUri) : storeOrUri;
  const steps = await storedCheckpointSteps(store, runId);
  const segments = await storedSegments(store, runId);
  const newest = steps.at(-1) ?? null;
  return {
    checkpointStep: newest,
    checkpoint: newest === null ? null : `${store.uriOf(storeTraining(runId).checkpoint(newest))}/`,
    lastSegment: segments.at(-1) ?? 0,
  };
}

/** Downloads `key` to `file` unless the local file is already at least as long (logs only grow). */
async function pullIfLonger(store: ArtifactStore, key: string, bytes: number, file: string): Promise<boolean> {
  try {
    if ((await stat(file)).size >= bytes) return false;
  } catch {
    // not here yet
  }
  await mkdir(path.dirname(file), { recursive: true });
  await store.getFile(key, file);
  return true;
}

/**
 * The training records a CPU node needs for the report (issue #13): every segment's logs and metrics Parquet
 * (with its manifest) and the trainer's recipe.json, from the store into the local run directory. Never the
 * checkpoints. Returns the number of files downloaded.
 */
export async function pullTrainingRecords(storeOrUri: string | ArtifactStore, runId: string, localRunDir: string): Promise<number> {
  const store = typeof storeOrUri === 'string' ? openArtifactStore(storeOrUri) : storeOrUri;
  const keys = storeTraining(runId);
  const local = localTraining(localRunDir);
  let pulled = 0;
  for (const object of await store.list(keys.segments)) {
    const rel = object.key.slice(keys.segments.length);
    if (await pullIfLonger(store, object.key, object.bytes, path.join(local.segments, ...rel.split('/')))) pulled += 1;
  }
  for (const object of await store.list(keys.metrics)) {
    const rel = object.key.slice(keys.metrics.length);
    const file = path.join(local.metricsDir, ...rel.split('/'));
    await mkdir(path.dirname(file), { recursive: true });
    await store.getFile(object.key, file); // rewritten by a retried segment: always the store's version
    pulled += 1;
  }
  const recipe = await store.head(keys.recipe);
  if (recipe && (await pullIfLonger(store, keys.recipe, recipe.bytes, local.recipe))) pulled += 1;
  return pulled;
}

export class SegmentMirror {
  readonly store: ArtifactStore;
  private readonly keys: ReturnType<typeof storeTraining>;
  private readonly local: ReturnType<typeof localTraining>;
  /** Bytes of each log file (relative to the segment folder) the store holds, as far as this mirror knows. */
  private readonly pushedLogs = new Map<string, number>();
  private readonly markedSteps = new Set<number>();
  private recipePushed = false;
  private running: Promise<void> | null = null;
  private again = false;
  private lastError: unknown = null;

  constructor(private readonly options: SegmentMirrorOptions) {
    this.store = typeof options.store === 'string' ? openArtifactStore(options.store) : options.store;
    this.keys = storeTraining(options.runId);
    this.local = localTraining(options.localRunDir);
  }

  get localRunDir(): string {
    return this.options.localRunDir;
  }

  /** The store URI of a checkpoint step's directory (what a segment reports instead of a node-local path). */
  checkpointUri(step: number | null): string | null {
    return step === null ? null : `${this.store.uriOf(this.keys.checkpoint(step))}/`;
  }

  async pull(): Promise<PullResult> {
    await this.store.ready();
    const result: PullResult = { checkpointStep: null, logs: [] };
    const steps = await storedCheckpointSteps(this.store, this.options.runId);
    for (const step of steps) this.markedSteps.add(step);
    const newest = steps.at(-1);
    const local = newestLocalCheckpoint(this.options.localRunDir);
    if (newest !== undefined && (local === null || local.step < newest)) {
      await pullDirectory(this.store, this.keys.marker(newest), path.join(this.local.checkpoints, stepDirName(newest)));
      result.checkpointStep = newest;
    }
    const prefix = `${this.keys.segmentDir(this.options.segment)}/`;
    for (const object of await this.store.list(prefix)) {
      const rel = object.key.slice(prefix.length);
      if (
        await pullIfLonger(this.store, object.key, object.bytes, path.join(this.local.segmentDir(this.options.segment), ...rel.split('/')))
      )
        result.logs.push(rel);
      this.pushedLogs.set(rel, object.bytes);
    }
    const recipe = await this.store.head(this.keys.recipe);
    if (recipe) {
      await pullIfLonger(this.store, this.keys.recipe, recipe.bytes, this.local.recipe);
      this.recipePushed = true;
    }
    return result;
  }

  /** Schedules a push round (coalesced with one already scheduled). */
  notify(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      do {
        this.again = false;
        try {
          await this.pushRound();
          this.lastError = null;
        } catch (error) {
          this.lastError = error;
          this.options.onPushError?.(error);
        }
      } while (this.again);
    })().finally(() => {
      this.running = null;
    });
  }

  /** Waits for the running round, pushes once more, and throws if that push failed. */
  async flush(): Promise<void> {
    while (this.running) await this.running;
    await this.pushRound();
  }

  /** Uploads the segment's metrics Parquet and then its manifest; returns the ref with the store's URI. */
  async publishSegmentMetrics(localPath: string): Promise<ArtifactRef> {
    const read = await readManifest(localPath);
    if (read.status !== 'ok')
      throw new Error(`publishing ${localPath}: its manifest is ${read.status === 'missing' ? 'missing' : read.reason}`);
    return publishArtifact(this.store, this.keys.segmentMetrics(this.options.segment), localPath, read.manifest);
  }

  private async pushRound(): Promise<void> {
    const dir = this.local.segmentDir(this.options.segment);
    // 1. Snapshot the logs: what this round uploads, and the steps it covers.
    const logs = new Map<string, Buffer>();
    let covered = 0;
    if (existsSync(dir)) {
      for (const name of readdirSync(dir).sort()) {
        const file = path.join(dir, name);
        if (!statSync(file).isFile()) continue;
        const bytes = await readFile(file);
        logs.set(name, bytes);
        if (name.endsWith('.stdout.jsonl')) covered = Math.max(covered, loggedSteps(bytes.toString('utf8')));
      }
    }
    // 2. The newest complete local checkpoint those logs cover, if newer than every marker the store has.
    const newestMarked = Math.max(0, ...this.markedSteps);
    const checkpoint =
      localCheckpoints(this.options.localRunDir)
        .filter((c) => c.step <= covered && c.step > newestMarked)
        .at(-1) ?? null;
    // 3. Changed logs (each object whole: a log only grows, a reader takes the longer copy).
    for (const [name, bytes] of logs) {
      if (this.pushedLogs.get(name) === bytes.length) continue;
      await this.store.putBytes(`${this.keys.segmentDir(this.options.segment)}/${name}`, bytes);
      this.pushedLogs.set(name, bytes.length);
    }
    if (!this.recipePushed && existsSync(this.local.recipe)) {
      await this.store.putFile(this.keys.recipe, this.local.recipe);
      this.recipePushed = true;
    }
    // 4. The checkpoint's files, then its marker: the commit record.
    if (checkpoint) {
      try {
        await pushDirectory(this.store, checkpoint.path, this.keys.checkpoint(checkpoint.step), this.keys.marker(checkpoint.step), {
          step: checkpoint.step,
          segment: this.options.segment,
          source: segmentName(this.options.segment),
        });
        this.markedSteps.add(checkpoint.step);
      } catch (error) {
        // The trainer may have pruned it (keepCheckpoints) while it was read: a newer one follows.
        if (existsSync(path.join(checkpoint.path, 'COMPLETE'))) throw error;
      }
    }
  }
}

/** Opens the store and the mirror of one segment's run directory. */
export async function openSegmentMirror(options: SegmentMirrorOptions): Promise<SegmentMirror> {
  const mirror = new SegmentMirror(options);
  await mirror.store.ready();
  return mirror;
}

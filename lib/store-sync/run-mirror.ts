import { existsSync, readdirSync, statSync } from 'node:fs';
import { mkdir, open, stat } from 'node:fs/promises';
import path from 'node:path';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import { writeBytesAtomically } from '../artifacts/atomic-write';
import { readManifest } from '../artifacts/manifest';
import { publishArtifact, pullDirectory, pushDirectory, type ArtifactStore } from '../artifacts/store';
import { newestFenceEntry, RunLease } from './fencing';
import { localCheckpoints, localTraining, newestLocalCheckpoint, segmentName, stepDirName, storeTraining } from './layout';
import { logFilesWithParts, logPartKey, readLogParts } from './log-parts';
import { checkpointsToDelete, deleteStoredCheckpoint, TRAINER_DEFAULT_KEEP_CHECKPOINTS } from './retention';

/**
 * A training segment's run directory mirrored through the artifact store (README "Deployment: several machines"), so a GPU node shares
 * nothing with the CPU nodes or with the GPU node that ran an earlier attempt:
 *
 * - `pull()` before the trainer starts: takes the run lease for this attempt (lib/store-sync/fencing.ts:
 *   an older attempt still running somewhere can no longer publish), then the store's newest complete
 *   checkpoint when it is newer than the newest local one, and the segment's earlier attempt logs where the
 *   store's copy is longer than the local one (logs only grow), plus the trainer's recipe.json.
 * - `notify()` as the trainer reports steps and checkpoints: a push round in the background (rounds never
 *   overlap; notifications during a round coalesce into one more round). A round reads what the segment's
 *   logs gained since the last push, uploads it as one more part per log (lib/store-sync/log-parts.ts: the
 *   bytes a push sends do not grow with the run), then the files of the newest local checkpoint whose step
 *   those logs cover, then that checkpoint's marker last, under the lease. So a marker exists only once the
 *   logs of every step up to it are in the store: a retry that resumes from it finds the metrics rows of
 *   those steps there. After a marker, checkpoints beyond `keepCheckpoints` are deleted from the store.
 * - `flush()` after the trainer exited: waits for the running round and pushes once more; throws the round's
 *   error (the attempt then fails and is retried, rather than report a checkpoint the store does not have).
 * - `publishSegmentMetrics()`: the segment's metrics Parquet (and manifest) to the store; returns its s3 ref.
 */
export interface SegmentMirrorOptions {
  store: ArtifactStore;
  runId: string;
  /** The node-local run directory this segment works in. */
  localRunDir: string;
  segment: number;
  /** The Temporal activity attempt: with `segment` and `startedAt`, the fencing token of the run lease. */
  attempt: number;
  /** When the attempt started (ms since the epoch). */
  startedAt: number;
  /** Checkpoints the store keeps (training.keepCheckpoints; unset: the trainer's default). */
  keepCheckpoints?: number;
  /** Steps whose checkpoints the store keeps whatever their age: the best of validation, and any a report names. */
  keepSteps?: () => { keepSteps?: Iterable<number>; bestStep?: number | null };
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

/**
 * What the store holds of a training run: where a new training workflow continues from (inspectTrainingRun).
 * The last segment counts the lease's holder too: a segment that took the lease and died before its first
 * push is still used up, so the next workflow's segment is newer than it and can take the lease.
 */
export async function inspectStoredRun(
  store: ArtifactStore,
  runId: string,
): Promise<{ checkpointStep: number | null; checkpoint: string | null; lastSegment: number }> {
  const steps = await storedCheckpointSteps(store, runId);
  const segments = await storedSegments(store, runId);
  const holder = (await newestFenceEntry(store, runId))?.holder.segment ?? 0;
  const newest = steps.at(-1) ?? null;
  return {
    checkpointStep: newest,
    checkpoint: newest === null ? null : `${store.uriOf(storeTraining(runId).checkpoint(newest))}/`,
    lastSegment: Math.max(segments.at(-1) ?? 0, holder),
  };
}

async function localSize(file: string): Promise<number> {
  try {
    return (await stat(file)).size;
  } catch {
    return -1;
  }
}

/** Downloads `key` to `file` unless the local file is already at least as long (logs only grow). */
async function pullIfLonger(store: ArtifactStore, key: string, bytes: number, file: string): Promise<boolean> {
  if ((await localSize(file)) >= bytes) return false;
  await mkdir(path.dirname(file), { recursive: true });
  await store.getFile(key, file);
  return true;
}

/** Where a pulled log stands in the store: its length there and the next part's sequence number. */
interface StoredLog {
  bytes: number;
  nextSeq: number;
}

/**
 * One segment's logs from the store into `localDir`: each log's parts concatenated (each part read once, in
 * order) and written whole where the local copy is shorter; a log written as one object (before logs were
 * parts) is downloaded as it is. Returns what the store holds of each log and the names downloaded.
 */
async function pullSegmentLogs(
  store: ArtifactStore,
  runId: string,
  segment: number,
  localDir: string,
): Promise<{ stored: Map<string, StoredLog>; pulled: string[] }> {
  const keys = storeTraining(runId);
  const prefix = `${keys.segmentDir(segment)}/`;
  const listed = await store.list(prefix);
  const stored = new Map<string, StoredLog>();
  const pulled: string[] = [];
  for (const [name, objects] of logFilesWithParts(listed, `${prefix}logs/`)) {
    const log = await readLogParts(store, keys.logParts(segment, name), objects);
    if (!log) continue;
    stored.set(name, { bytes: log.bytes.length, nextSeq: log.nextSeq });
    const file = path.join(localDir, name);
    if ((await localSize(file)) >= log.bytes.length) continue;
    await writeBytesAtomically(file, log.bytes);
    pulled.push(name);
  }
  for (const object of listed) {
    const name = object.key.slice(prefix.length);
    if (name.includes('/') || stored.has(name)) continue;
    // A whole-object log: the parts this node pushes start again at 0, so the parts alone hold the whole log.
    if (await pullIfLonger(store, object.key, object.bytes, path.join(localDir, name))) pulled.push(name);
  }
  return { stored, pulled: pulled.sort() };
}

/**
 * The training records a CPU node needs for the report (README "Deployment: several machines"): every segment's logs and metrics Parquet
 * (with its manifest) and the trainer's recipe.json, from the store into the local run directory. Never the
 * checkpoints. Returns the number of files downloaded.
 */
export async function pullTrainingRecords(store: ArtifactStore, runId: string, localRunDir: string): Promise<number> {
  const keys = storeTraining(runId);
  const local = localTraining(localRunDir);
  let pulled = 0;
  for (const segment of await storedSegments(store, runId)) {
    pulled += (await pullSegmentLogs(store, runId, segment, local.segmentDir(segment))).pulled.length;
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

/** What this mirror has pushed of one log file, and the steps the part of it it has read records. */
interface LogState {
  /** Bytes of the file the store holds. */
  pushed: number;
  nextSeq: number;
  /** Bytes of the file read for step lines, and the unfinished line at their end. */
  scanned: number;
  carry: string;
  maxStep: number;
}

/** The step lines of `text`'s whole lines added to `state` (a copy): the unfinished last line is carried. */
function scanSteps(state: Pick<LogState, 'carry' | 'maxStep'>, text: string): Pick<LogState, 'carry' | 'maxStep'> {
  const joined = state.carry + text;
  const cut = joined.lastIndexOf('\n');
  if (cut === -1) return { carry: joined, maxStep: state.maxStep };
  return { carry: joined.slice(cut + 1), maxStep: Math.max(state.maxStep, loggedSteps(joined.slice(0, cut))) };
}

async function readRange(file: string, from: number, to: number): Promise<Buffer> {
  const handle = await open(file, 'r');
  try {
    const out = Buffer.alloc(to - from);
    let offset = 0;
    while (offset < out.length) {
      const { bytesRead } = await handle.read(out, offset, out.length - offset, from + offset);
      if (bytesRead === 0) break;
      offset += bytesRead;
    }
    return out.subarray(0, offset);
  } finally {
    await handle.close();
  }
}

/** Bytes put to the store by one push round, by kind (the store-traffic bench reads these). */
export interface PushRoundTraffic {
  logBytes: number;
  logParts: number;
  checkpointBytes: number;
  markers: number;
  deletedCheckpoints: number;
}

export class SegmentMirror {
  readonly store: ArtifactStore;
  private readonly keys: ReturnType<typeof storeTraining>;
  private readonly local: ReturnType<typeof localTraining>;
  private readonly logs = new Map<string, LogState>();
  private readonly markedSteps = new Set<number>();
  private lease: RunLease | null = null;
  private recipePushed = false;
  private running: Promise<void> | null = null;
  private again = false;
  private lastError: unknown = null;
  /** What each push round sent, oldest first. */
  readonly traffic: PushRoundTraffic[] = [];

  constructor(private readonly options: SegmentMirrorOptions) {
    this.store = options.store;
    this.keys = storeTraining(options.runId);
    this.local = localTraining(options.localRunDir);
  }

  get localRunDir(): string {
    return this.options.localRunDir;
  }

  /** The generation of the run lease this mirror holds (null before it took it). */
  get leaseGeneration(): number | null {
    return this.lease?.generation ?? null;
  }

  /** The store URI of a checkpoint step's directory (what a segment reports instead of a node-local path). */
  checkpointUri(step: number | null): string | null {
    return step === null ? null : `${this.store.uriOf(this.keys.checkpoint(step))}/`;
  }

  /** Takes the run lease for this attempt (once): from here on an older attempt's publishes are refused. */
  async acquireLease(): Promise<RunLease> {
    this.lease ??= await RunLease.acquire(this.store, this.options.runId, {
      segment: this.options.segment,
      attempt: this.options.attempt,
      startedAt: this.options.startedAt,
    });
    return this.lease;
  }

  async pull(): Promise<PullResult> {
    await this.store.ready();
    await this.acquireLease();
    const result: PullResult = { checkpointStep: null, logs: [] };
    const steps = await storedCheckpointSteps(this.store, this.options.runId);
    for (const step of steps) this.markedSteps.add(step);
    const newest = steps.at(-1);
    const local = newestLocalCheckpoint(this.options.localRunDir);
    if (newest !== undefined && (local === null || local.step < newest)) {
      await pullDirectory(this.store, this.keys.marker(newest), path.join(this.local.checkpoints, stepDirName(newest)));
      result.checkpointStep = newest;
    }
    const { stored, pulled } = await pullSegmentLogs(
      this.store,
      this.options.runId,
      this.options.segment,
      this.local.segmentDir(this.options.segment),
    );
    result.logs = pulled;
    for (const [name, log] of stored) this.logs.set(name, { pushed: log.bytes, nextSeq: log.nextSeq, scanned: 0, carry: '', maxStep: 0 });
    const recipe = await this.store.head(this.keys.recipe);
    if (recipe) {
      await pullIfLonger(this.store, this.keys.recipe, recipe.bytes, this.local.recipe);
      this.recipePushed = true;
    }
    return result;
  }

  /** Schedules a push round (coalesced with one already scheduled). A fenced mirror pushes nothing more. */
  notify(): void {
    if (this.lease?.fenced) return;
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
      } while (this.again && !this.lease?.fenced);
    })().finally(() => {
      this.running = null;
    });
  }

  /** Waits for the running round, pushes once more, and throws if that push failed (FencedWriterError once fenced). */
  async flush(): Promise<void> {
    while (this.running) await this.running;
    await this.pushRound();
  }

  /** Uploads the segment's metrics Parquet and then its manifest; returns the ref with the store's URI. */
  async publishSegmentMetrics(localPath: string): Promise<ArtifactRef> {
    const read = await readManifest(localPath);
    if (read.status !== 'ok')
      throw new Error(`publishing ${localPath}: its manifest is ${read.status === 'missing' ? 'missing' : read.reason}`);
    await (await this.acquireLease()).check(`publishing ${localPath}`);
    return publishArtifact(this.store, this.keys.segmentMetrics(this.options.segment), localPath, read.manifest);
  }

  private async pushRound(): Promise<void> {
    const lease = await this.acquireLease();
    const traffic: PushRoundTraffic = { logBytes: 0, logParts: 0, checkpointBytes: 0, markers: 0, deletedCheckpoints: 0 };
    const dir = this.local.segmentDir(this.options.segment);
    // 1. What each log gained since the last push: what this round uploads, and the steps it covers.
    const grown: { name: string; bytes: Buffer; next: LogState }[] = [];
    let covered = 0;
    if (existsSync(dir)) {
      for (const name of readdirSync(dir).sort()) {
        const file = path.join(dir, name);
        if (/\.tmp-\d+-[0-9a-f]+$/.test(name)) continue; // an atomic write in flight
        const info = statSync(file, { throwIfNoEntry: false });
        if (!info?.isFile()) continue;
        const state = this.logs.get(name) ?? { pushed: 0, nextSeq: 1, scanned: 0, carry: '', maxStep: 0 };
        // Logs only grow; a file shorter than what was pushed is a rewrite this mirror leaves alone.
        const size = Math.max(info.size, state.pushed);
        const isStdout = name.endsWith('.stdout.jsonl');
        // Only the trainer's stdout is read for step lines; of the others only the new bytes are read.
        const from = isStdout ? Math.min(state.pushed, state.scanned) : state.pushed;
        const read = size > from ? await readRange(file, from, size) : Buffer.alloc(0);
        let next = { ...state };
        if (isStdout && state.scanned < from + read.length)
          next = { ...next, ...scanSteps(state, read.subarray(state.scanned - from).toString('utf8')), scanned: from + read.length };
        if (isStdout) covered = Math.max(covered, next.maxStep);
        const fresh = read.subarray(state.pushed - from);
        if (fresh.length > 0) grown.push({ name, bytes: fresh, next });
        else this.logs.set(name, next);
      }
    }
    // 2. The newest complete local checkpoint those logs cover, if newer than every marker the store has.
    const newestMarked = Math.max(0, ...this.markedSteps);
    const checkpoint =
      localCheckpoints(this.options.localRunDir)
        .filter((c) => c.step <= covered && c.step > newestMarked)
        .at(-1) ?? null;
    // 3. The new bytes of each log, as one more part.
    if (grown.length > 0) await lease.check('pushing logs');
    for (const { name, bytes, next } of grown) {
      const key = logPartKey(this.keys.logParts(this.options.segment, name), {
        seq: next.nextSeq,
        offset: next.pushed,
        length: bytes.length,
      });
      await this.store.putBytes(key, bytes);
      traffic.logBytes += bytes.length;
      traffic.logParts += 1;
      this.logs.set(name, { ...next, pushed: next.pushed + bytes.length, nextSeq: next.nextSeq + 1 });
    }
    if (!this.recipePushed && existsSync(this.local.recipe)) {
      await lease.check('pushing recipe.json');
      await this.store.putFile(this.keys.recipe, this.local.recipe);
      this.recipePushed = true;
    }
    // 4. The checkpoint's files, then its marker under the lease: the commit record.
    if (checkpoint) {
      try {
        await lease.check(`pushing checkpoint ${checkpoint.step}`);
        const marker = await pushDirectory(
          this.store,
          checkpoint.path,
          this.keys.checkpoint(checkpoint.step),
          this.keys.marker(checkpoint.step),
          { step: checkpoint.step, segment: this.options.segment, source: segmentName(this.options.segment), generation: lease.generation },
          (key, body) => lease.publishMarker(key, body),
        );
        this.markedSteps.add(checkpoint.step);
        traffic.checkpointBytes += marker.files.reduce((sum, f) => sum + f.bytes, 0);
        traffic.markers += 1;
      } catch (error) {
        // The trainer may have pruned it (keepCheckpoints) while it was read: a newer one follows.
        if (lease.fenced || existsSync(path.join(checkpoint.path, 'COMPLETE'))) throw error;
      }
      // 5. Older checkpoints beyond the limit leave the store, markers first.
      if (this.markedSteps.has(checkpoint.step)) traffic.deletedCheckpoints += await this.applyRetention(lease);
    }
    this.traffic.push(traffic);
  }

  private async applyRetention(lease: RunLease): Promise<number> {
    const extra = this.options.keepSteps?.() ?? {};
    const doomed = checkpointsToDelete(await storedCheckpointSteps(this.store, this.options.runId), {
      keepCheckpoints: this.options.keepCheckpoints ?? TRAINER_DEFAULT_KEEP_CHECKPOINTS,
      ...extra,
    });
    for (const step of doomed) {
      await deleteStoredCheckpoint(this.store, this.options.runId, step, lease);
      this.markedSteps.delete(step);
    }
    return doomed.length;
  }
}

/** Opens the store and the mirror of one segment's run directory. */
export async function openSegmentMirror(options: SegmentMirrorOptions): Promise<SegmentMirror> {
  const mirror = new SegmentMirror(options);
  await mirror.store.ready();
  return mirror;
}

import { z } from 'zod';
import type { ArtifactStore } from '../artifacts/store';
import { storeTraining } from './layout';

/**
 * The run lease: which attempt of which segment may publish to a run's part of the store. A GPU node cut off
 * from Temporal keeps training after its attempt was given up and a new attempt started elsewhere; without a
 * fence its later checkpoint markers would land on top of the new attempt's (README "Deployment").
 *
 * The lease is a log of small objects, `<runId>/training/fence/<seq>.json`, each created once with a
 * create-if-absent write (S3 `If-None-Match: *`, link(2) on a `file://` store). A segment acquires the lease
 * by appending an `acquire` entry after the newest one; its generation is that entry's sequence number. Each
 * marker it publishes is one more entry, created at the sequence number right after its own last one: when
 * a newer attempt has acquired meanwhile, that number is taken and the create fails, so the old writer's
 * publish is refused (FencedWriterError) in the same atomic write that would have committed it. A writer
 * never needs If-Match, only create-if-absent, which more S3-compatible servers enforce.
 *
 * Entries are never deleted: a deleted number could be created again by a writer that was fenced.
 */
export const FencingTokenSchema = z.object({
  segment: z.number().int().min(0),
  /** The Temporal activity attempt (1, 2, …). */
  attempt: z.number().int().min(1),
  /** When the attempt started (ms since the epoch): orders a restarted workflow's run of the same segment and attempt. */
  startedAt: z.number().int().min(0),
});
export type FencingToken = z.infer<typeof FencingTokenSchema>;

const PublishedMarkerSchema = z.object({ markerKey: z.string().min(1), marker: z.record(z.string(), z.unknown()) });

export const FenceEntrySchema = z.object({
  seq: z.number().int().min(1),
  kind: z.enum(['acquire', 'publish']),
  /** The sequence number of the holder's acquire entry. */
  generation: z.number().int().min(1),
  holder: FencingTokenSchema,
  /** The newest marker published up to this entry (carried forward), so one entry tells a new holder what is committed. */
  lastPublished: PublishedMarkerSchema.nullable(),
  writtenAt: z.string(),
});
export type FenceEntry = z.infer<typeof FenceEntrySchema>;

const describe = (t: FencingToken) => `segment ${t.segment} attempt ${t.attempt} (started ${new Date(t.startedAt).toISOString()})`;

/** A writer whose lease was taken over by a newer attempt tried to publish: nothing it tried was committed. */
export class FencedWriterError extends Error {
  override readonly name = 'FencedWriterError';
  constructor(
    readonly runId: string,
    readonly mine: { generation: number; holder: FencingToken },
    readonly newer: FenceEntry | null,
    what: string,
  ) {
    super(
      `run ${runId}: ${what} refused: this writer (${describe(mine.holder)}, lease generation ${mine.generation}) was fenced by ` +
        (newer ? `${describe(newer.holder)}, generation ${newer.generation}` : 'a newer lease holder'),
    );
  }
}

/** A segment tried to acquire the lease an attempt newer than it already holds (a stalled older attempt waking up late). */
export class LeaseHeldByNewerAttemptError extends Error {
  override readonly name = 'LeaseHeldByNewerAttemptError';
  constructor(
    readonly runId: string,
    readonly mine: FencingToken,
    readonly holder: FencingToken,
  ) {
    super(`run ${runId}: ${describe(mine)} cannot take the store lease: ${describe(holder)} holds it and is newer`);
  }
}

/** a is newer than b: later segment, then later attempt, then later start. */
export function isNewerToken(a: FencingToken, b: FencingToken): boolean {
  if (a.segment !== b.segment) return a.segment > b.segment;
  if (a.attempt !== b.attempt) return a.attempt > b.attempt;
  return a.startedAt > b.startedAt;
}

const SEQ = /\/(\d{10})\.json$/;

async function readEntry(store: ArtifactStore, key: string): Promise<FenceEntry | null> {
  const bytes = await store.getBytes(key);
  if (bytes === null) return null;
  const parsed = FenceEntrySchema.safeParse(JSON.parse(bytes.toString('utf8')));
  if (!parsed.success) throw new Error(`${store.uriOf(key)} is not a fence entry: ${parsed.error.message}`);
  return parsed.data;
}

/** The newest fence entry of a run, or null before any segment acquired the lease. */
export async function newestFenceEntry(store: ArtifactStore, runId: string): Promise<FenceEntry | null> {
  const keys = storeTraining(runId);
  const seqs = (await store.list(keys.fence))
    .map((o) => SEQ.exec(o.key))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]));
  if (seqs.length === 0) return null;
  return readEntry(store, keys.fenceEntry(Math.max(...seqs)));
}

export class RunLease {
  private lastSeq: number;
  private fencedBy: FenceEntry | null | undefined = undefined;

  private constructor(
    private readonly store: ArtifactStore,
    readonly runId: string,
    readonly holder: FencingToken,
    readonly generation: number,
  ) {
    this.lastSeq = generation;
  }

  /**
   * Takes the lease for `holder`: appends an acquire entry after the newest one (retrying when another
   * writer appended first). Refused when the holder of the newest entry is newer than `holder`. The newest
   * published marker is rewritten when its object is missing (its writer stopped between the two writes),
   * so what the log says is committed is what a pull finds.
   */
  static async acquire(store: ArtifactStore, runId: string, holder: FencingToken): Promise<RunLease> {
    const keys = storeTraining(runId);
    for (;;) {
      const newest = await newestFenceEntry(store, runId);
      if (newest && isNewerToken(newest.holder, holder)) throw new LeaseHeldByNewerAttemptError(runId, holder, newest.holder);
      const seq = (newest?.seq ?? 0) + 1;
      const entry: FenceEntry = {
        seq,
        kind: 'acquire',
        generation: seq,
        holder,
        lastPublished: newest?.lastPublished ?? null,
        writtenAt: new Date().toISOString(),
      };
      if (!(await store.putBytesIfAbsent(keys.fenceEntry(seq), `${JSON.stringify(entry)}\n`))) continue;
      const lease = new RunLease(store, runId, holder, seq);
      if (entry.lastPublished && !(await store.head(entry.lastPublished.markerKey))) {
        await store.putBytes(entry.lastPublished.markerKey, `${JSON.stringify(entry.lastPublished.marker, null, 2)}\n`);
      }
      return lease;
    }
  }

  /** Whether a newer holder was seen (by a refused publish or a check). */
  get fenced(): boolean {
    return this.fencedBy !== undefined;
  }

  private refuse(newer: FenceEntry | null, what: string): never {
    this.fencedBy = newer;
    throw new FencedWriterError(this.runId, { generation: this.generation, holder: this.holder }, newer, what);
  }

  /**
   * Throws FencedWriterError when a newer holder has appended after this writer's last entry. A read, so a
   * holder may change right after it; it guards what no other attempt writes (this attempt's own log parts,
   * the checkpoint files before their marker), and keeps a fenced writer from uploading for nothing.
   */
  async check(what: string): Promise<void> {
    if (this.fencedBy !== undefined) this.refuse(this.fencedBy, what);
    for (;;) {
      const next = storeTraining(this.runId).fenceEntry(this.lastSeq + 1);
      if (!(await this.store.head(next))) return;
      const other = await readEntry(this.store, next);
      if (other?.generation !== this.generation) this.refuse(other, what);
      this.lastSeq += 1; // our own entry, whose create answered with an error after it landed
    }
  }

  /**
   * Publishes a marker under the lease: the publish entry is the atomic commit (refused with FencedWriterError
   * once a newer holder has acquired), then the marker object itself, for listing.
   */
  async publishMarker(markerKey: string, marker: Record<string, unknown>): Promise<void> {
    const what = `publishing ${this.store.uriOf(markerKey)}`;
    if (this.fencedBy !== undefined) this.refuse(this.fencedBy, what);
    const lastPublished = { markerKey, marker };
    for (;;) {
      const seq = this.lastSeq + 1;
      const entry: FenceEntry = {
        seq,
        kind: 'publish',
        generation: this.generation,
        holder: this.holder,
        lastPublished,
        writtenAt: new Date().toISOString(),
      };
      const key = storeTraining(this.runId).fenceEntry(seq);
      // A create that throws leaves lastSeq where it was: the retry finds its entry if it landed after all.
      const created = await this.store.putBytesIfAbsent(key, `${JSON.stringify(entry)}\n`);
      if (!created) {
        const other = await readEntry(this.store, key);
        // Our own generation's entry is one whose create answered with an error after it landed: step past it.
        if (other?.generation !== this.generation) this.refuse(other, what);
      }
      this.lastSeq = seq;
      if (created) break;
    }
    await this.store.putBytes(markerKey, `${JSON.stringify(marker, null, 2)}\n`);
  }
}

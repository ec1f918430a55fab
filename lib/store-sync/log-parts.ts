import type { ArtifactStore, StoredObject } from '../artifacts/store';

/**
 * A growing log file in the store as appended parts: an object store cannot append, and re-uploading the
 * whole log at each push makes a run's traffic grow with the square of its length. Each push uploads only
 * the bytes since the last one, as
 *
 *     <prefix>part-<seq 6>-<offset 12>-<length 12>.jsonl
 *
 * and a reader concatenates the parts in sequence order. The offset and length in the name make the parts
 * self-checking: a reader takes, for each sequence number, the longest whole part (its stored size is its
 * named length) that starts where the previous one ended, and stops at the first sequence number without
 * one (a part cut short, a gap). A retried push reuses its sequence number and offset, so a part whose
 * upload answered with an error after it landed is superseded by the retry, never read twice.
 */
const PART = /(?:^|\/)part-(\d{6})-(\d{12})-(\d{12})\.jsonl$/;

const pad = (n: number, width: number) => String(n).padStart(width, '0');

export function logPartKey(prefix: string, part: { seq: number; offset: number; length: number }): string {
  return `${prefix}part-${pad(part.seq, 6)}-${pad(part.offset, 12)}-${pad(part.length, 12)}.jsonl`;
}

export interface LogPart {
  key: string;
  seq: number;
  offset: number;
  length: number;
}

/** The parts a reader uses, in order: for each sequence number the longest whole part that continues the previous one. */
export function usableLogParts(objects: StoredObject[], prefix: string): LogPart[] {
  const bySeq = new Map<number, LogPart[]>();
  for (const object of objects) {
    if (!object.key.startsWith(prefix)) continue;
    const match = PART.exec(object.key.slice(prefix.length));
    if (!match) continue;
    const part = { key: object.key, seq: Number(match[1]), offset: Number(match[2]), length: Number(match[3]) };
    if (object.bytes !== part.length) continue; // cut short: a writer killed mid-upload on a store without atomic puts
    bySeq.set(part.seq, [...(bySeq.get(part.seq) ?? []), part]);
  }
  const out: LogPart[] = [];
  let offset = 0;
  for (const seq of [...bySeq.keys()].sort((a, b) => a - b)) {
    if (seq !== (out.at(-1)?.seq ?? 0) + 1) break;
    const next = bySeq
      .get(seq)!
      .filter((p) => p.offset === offset)
      .sort((a, b) => b.length - a.length)[0];
    if (!next) break;
    out.push(next);
    offset += next.length;
  }
  return out;
}

export interface AssembledLog {
  bytes: Buffer;
  /** Parts read (each once). */
  parts: number;
  /** The sequence number the next push uses. */
  nextSeq: number;
}

/** The log the parts under `prefix` make, each part read once, in order; null when there are none. */
export async function readLogParts(store: ArtifactStore, prefix: string, listed?: StoredObject[]): Promise<AssembledLog | null> {
  const parts = usableLogParts(listed ?? (await store.list(prefix)), prefix);
  if (parts.length === 0) return null;
  const chunks: Buffer[] = [];
  for (const [i, part] of parts.entries()) {
    const bytes = await store.getBytes(part.key);
    // Deleted or replaced between list and read: the log is what came before it.
    if (bytes === null || bytes.length !== part.length) return { bytes: Buffer.concat(chunks), parts: i, nextSeq: part.seq };
    chunks.push(bytes);
  }
  return { bytes: Buffer.concat(chunks), parts: parts.length, nextSeq: parts.at(-1)!.seq + 1 };
}

/** The log files (`attempt-01.stdout.jsonl`, …) that have parts under `logsPrefix` (`…/logs/`), by name. */
export function logFilesWithParts(objects: StoredObject[], logsPrefix: string): Map<string, StoredObject[]> {
  const files = new Map<string, StoredObject[]>();
  for (const object of objects) {
    if (!object.key.startsWith(logsPrefix)) continue;
    const rest = object.key.slice(logsPrefix.length);
    const slash = rest.indexOf('/');
    if (slash <= 0 || !PART.test(rest.slice(slash + 1))) continue;
    const name = rest.slice(0, slash);
    files.set(name, [...(files.get(name) ?? []), object]);
  }
  return files;
}

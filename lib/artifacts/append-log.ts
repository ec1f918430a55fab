import { createReadStream } from 'node:fs';
import { mkdir, open, readdir, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const SHARD_EXTENSION = '.jsonl';
const SHARD_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

export type AppendLog = {
  readonly path: string;
  /** Bytes of an unfinished last line (left by a kill mid-write) that were cut off when the shard was opened. */
  readonly droppedTornBytes: number;
  /** Appends the records as JSON lines with one write and one fsync: once it resolves they survive a kill. */
  append(records: object[]): Promise<void>;
  close(): Promise<void>;
};

/**
 * Opens (or creates) the shard `<dir>/<shardName>.jsonl` of an append-only log for per-item work that must
 * survive a kill (judge calls, rollouts): a retry reads what finished and skips it. The log never
 * deduplicates: an item may be recorded twice (finished, then redone after a crash before the caller saw
 * the append resolve), so callers dedupe by their own item key when reading. One writer per shard: give
 * concurrent workers distinct shard names.
 *
 * A shard whose last line was torn by a kill is repaired on open by cutting that line off, so new records
 * never glue onto a fragment (the torn record's append never resolved, so its item was not finished).
 */
export async function openAppendLog(dir: string, shardName: string): Promise<AppendLog> {
  checkShardName(shardName);
  await mkdir(dir, { recursive: true });
  const path = join(dir, `${shardName}${SHARD_EXTENSION}`);
  const droppedTornBytes = await cutTornTail(path);
  const handle = await open(path, 'a');
  let closed = false;
  // Appends run one after another so concurrent calls never interleave their lines.
  const writes = serialQueue();

  return {
    path,
    droppedTornBytes,
    append(records) {
      if (closed) return Promise.reject(new Error(`Append log ${path} is closed`));
      let bytes: Buffer;
      try {
        bytes = Buffer.from(records.map((record, i) => serialize(record, i, path)).join(''), 'utf8');
      } catch (err) {
        return Promise.reject(err);
      }
      return writes.run(() => (bytes.length === 0 ? undefined : writeAndSync(handle, bytes)));
    },
    async close() {
      if (closed) return;
      closed = true;
      await writes.settled();
      await handle.close();
    },
  };
}

export type MalformedLogLine = { shard: string; line: number; reason: string };

export type AppendLogContents<T> = {
  records: T[];
  /** Shard files read, in the order their records appear. */
  shards: string[];
  /** Last lines of shards that were cut short by a kill mid-write and skipped. */
  tornLines: number;
  /** Unreadable lines that are not a shard's last line: damage a kill cannot explain, skipped and reported. */
  malformedLines: MalformedLogLine[];
};

/**
 * Reads every shard of the log in `dir` (sorted by name), skipping a torn last line per shard and counting
 * it. A directory that does not exist yet is an empty log. Records are returned as written: callers
 * dedupe by their own key.
 */
export async function readAppendLog<T extends object = Record<string, unknown>>(dir: string): Promise<AppendLogContents<T>> {
  let names: string[];
  try {
    names = (await readdir(dir, { withFileTypes: true }))
      .filter((entry) => entry.isFile() && entry.name.endsWith(SHARD_EXTENSION))
      .map((entry) => entry.name)
      .sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { records: [], shards: [], tornLines: 0, malformedLines: [] };
    throw err;
  }
  const contents: AppendLogContents<T> = { records: [], shards: names, tornLines: 0, malformedLines: [] };
  for (const name of names) {
    const stream = createReadStream(join(dir, name), { encoding: 'utf8' });
    const lines = createInterface({ input: stream, crlfDelay: Infinity });
    // A failed line is only known to be the torn last one when no line follows it.
    let failed: MalformedLogLine | undefined;
    let lineNumber = 0;
    for await (const line of lines) {
      lineNumber++;
      if (line === '') continue;
      if (failed) contents.malformedLines.push(failed);
      failed = undefined;
      const parsed = parseLogLine(line);
      if ('record' in parsed) contents.records.push(parsed.record as T);
      else failed = { shard: name, line: lineNumber, reason: parsed.reason };
    }
    if (failed) contents.tornLines++;
  }
  return contents;
}

/** Runs tasks one after another in the order given; a task that fails fails its own caller, not the tasks after it. */
export function serialQueue(): { run(task: () => Promise<void> | undefined): Promise<void>; settled(): Promise<void> } {
  let tail: Promise<void> = Promise.resolve();
  return {
    run(task) {
      const run = tail.then(task);
      tail = run.catch(() => undefined);
      return run;
    },
    /** Resolves once every task given so far has settled. */
    settled: () => tail,
  };
}

/** Throws unless `shardName` can name a shard: letters, digits, '.', '_' or '-', not starting with '.'. */
export function checkShardName(shardName: string): void {
  if (!SHARD_NAME.test(shardName)) {
    throw new TypeError(
      `Append log shard name ${JSON.stringify(shardName)} must be letters, digits, '.', '_' or '-' and not start with '.'`,
    );
  }
}

/** One line of a shard: the record it holds, or why it holds none. */
export function parseLogLine(line: string): { record: object } | { reason: string } {
  try {
    const value: unknown = JSON.parse(line);
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return { reason: 'not a JSON object' };
    return { record: value };
  } catch (err) {
    return { reason: `malformed JSON: ${(err as Error).message}` };
  }
}

function serialize(record: object, index: number, path: string): string {
  if (record === null || typeof record !== 'object' || Array.isArray(record)) {
    throw new TypeError(
      `Append log ${path}: record ${index} must be a plain object, got ${record === null ? 'null' : Array.isArray(record) ? 'an array' : typeof record}`,
    );
  }
  return `${JSON.stringify(record)}\n`;
}

async function writeAndSync(handle: FileHandle, bytes: Buffer): Promise<void> {
  let offset = 0;
  while (offset < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, offset, bytes.length - offset);
    offset += bytesWritten;
  }
  await handle.sync();
}

/** Cuts an unterminated last line off the shard; returns how many bytes were removed. */
async function cutTornTail(path: string): Promise<number> {
  let handle: FileHandle;
  try {
    handle = await open(path, 'r+');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
  try {
    const { size } = await handle.stat();
    const window = Buffer.alloc(64 * 1024);
    let end = size;
    while (end > 0) {
      const start = Math.max(0, end - window.length);
      const { bytesRead } = await handle.read(window, 0, end - start, start);
      const newline = window.subarray(0, bytesRead).lastIndexOf(0x0a);
      if (newline >= 0) return await truncateTo(handle, start + newline + 1, size);
      end = start;
    }
    return await truncateTo(handle, 0, size);
  } finally {
    await handle.close();
  }
}

async function truncateTo(handle: FileHandle, keep: number, size: number): Promise<number> {
  if (keep < size) {
    await handle.truncate(keep);
    await handle.sync();
  }
  return size - keep;
}

import { randomBytes } from 'node:crypto';
import { checkShardName, parseLogLine, serialQueue, type AppendLogContents } from '../append-log';
import type { ArtifactStore } from './store';

const CHUNK = /^(\d{10})-[0-9a-f]{8}\.jsonl$/;

export type StoreAppendLog = {
  readonly dir: string;
  readonly shard: string;
  /** Appends the records as one new object: once it resolves they are in the store, whole. */
  append(records: object[]): Promise<void>;
  close(): Promise<void>;
};

/**
 * The store's form of lib/artifacts/append-log.ts for nodes that share no disk. An object store cannot append
 * to an object, so each `append` writes the records as one new chunk object
 * `<dir>/<shard>/<seq>-<rand>.jsonl`; a shard is its chunks in sequence order. A chunk is written atomically,
 * so there are no torn lines to cut; as on disk, records are never deduplicated (callers dedupe by their item
 * key) and each shard has one writer (distinct shard names for concurrent workers). A writer that reopens its
 * shard after a kill continues after the highest sequence number it finds.
 */
export async function openStoreAppendLog(store: ArtifactStore, dir: string, shard: string): Promise<StoreAppendLog> {
  checkShardName(shard);
  const prefix = `${dir.replace(/\/+$/, '')}/${shard}/`;
  const existing = (await store.list(prefix))
    .map((o) => CHUNK.exec(o.key.slice(prefix.length)))
    .filter((m): m is RegExpExecArray => m !== null);
  let next = existing.reduce((max, m) => Math.max(max, Number(m[1])), 0) + 1;
  let closed = false;
  const writes = serialQueue();
  return {
    dir,
    shard,
    append(records) {
      if (closed) return Promise.reject(new Error(`Append log ${store.uriOf(prefix.slice(0, -1))} is closed`));
      for (const [i, record] of records.entries()) {
        if (record === null || typeof record !== 'object' || Array.isArray(record)) {
          return Promise.reject(new TypeError(`Append log ${store.uriOf(prefix.slice(0, -1))}: record ${i} must be a plain object`));
        }
      }
      if (records.length === 0) return writes.settled();
      const text = records.map((record) => `${JSON.stringify(record)}\n`).join('');
      return writes.run(async () => {
        const key = `${prefix}${String(next).padStart(10, '0')}-${randomBytes(4).toString('hex')}.jsonl`;
        await store.putBytes(key, text);
        next += 1;
      });
    },
    async close() {
      closed = true;
      await writes.settled();
    },
  };
}

/** Every record of every shard under `dir`, shards sorted by name and each in chunk order; an absent log is empty. */
export async function readStoreAppendLog<T extends object = Record<string, unknown>>(
  store: ArtifactStore,
  dir: string,
): Promise<AppendLogContents<T>> {
  const prefix = `${dir.replace(/\/+$/, '')}/`;
  const byShard = new Map<string, string[]>();
  for (const object of await store.list(prefix)) {
    const [shard, chunk, ...more] = object.key.slice(prefix.length).split('/');
    if (!shard || !chunk || more.length > 0 || !CHUNK.test(chunk)) continue;
    byShard.set(shard, [...(byShard.get(shard) ?? []), object.key]);
  }
  const shards = [...byShard.keys()].sort();
  const contents: AppendLogContents<T> = { records: [], shards, tornLines: 0, malformedLines: [] };
  for (const shard of shards) {
    for (const key of byShard.get(shard)!.sort()) {
      const bytes = await store.getBytes(key);
      if (bytes === null) continue; // deleted between list and read
      bytes
        .toString('utf8')
        .split('\n')
        .forEach((line, i) => {
          if (line === '') return;
          const parsed = parseLogLine(line);
          if ('record' in parsed) contents.records.push(parsed.record as T);
          else contents.malformedLines.push({ shard: key, line: i + 1, reason: parsed.reason });
        });
    }
  }
  return contents;
}

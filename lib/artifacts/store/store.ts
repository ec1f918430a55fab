import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { StoreConfigError } from './errors';

/** One object of a store: its key (relative to the store's root), size, and sha256 when the store records it. */
export interface StoredObject {
  key: string;
  bytes: number;
  /** Recorded at write time (S3 object metadata); null where the store keeps none (a plain file). */
  sha256: string | null;
}

export interface WriteResult {
  sha256: string;
  bytes: number;
}

/**
 * Where artifacts live when nodes share no disk: `file://<dir>` (a directory: one machine, or a shared mount)
 * or `s3://bucket/prefix` (any S3-compatible object store). Keys are `/`-separated paths below the root.
 *
 * Every write is atomic: a reader sees the old object or the complete new one, never a prefix. Large objects
 * stream in both directions; nothing is held whole in memory.
 */
export interface ArtifactStore {
  /** The root URI (`file:///abs/dir` or `s3://bucket/prefix`). */
  readonly root: string;
  uriOf(key: string): string;
  /** The key of a URI inside this store, or null when the URI is elsewhere. */
  keyOf(uri: string): string | null;
  /** Checks that the store answers and the bucket/dir exists, once; throws the named error otherwise. */
  ready(): Promise<void>;
  /** Uploads a local file (streamed), recording its sha256. */
  putFile(key: string, localPath: string): Promise<WriteResult>;
  putBytes(key: string, content: Uint8Array | string): Promise<WriteResult>;
  /** Downloads to `localPath` atomically (streamed); verifies the recorded sha256 when there is one. */
  getFile(key: string, localPath: string): Promise<WriteResult>;
  /** A small object's bytes (manifests), or null when there is no such object. */
  getBytes(key: string): Promise<Buffer | null>;
  head(key: string): Promise<StoredObject | null>;
  /** Objects whose key starts with `prefix` (use a trailing `/` for a folder), sorted by key. */
  list(prefix: string): Promise<StoredObject[]>;
  delete(key: string): Promise<void>;
  /**
   * Creates `key` with `content` only if no object is there yet: true when this call created it, false when
   * one already existed (the existing object is left as it was). The commit step of the run lease
   * (lib/store-sync/fencing.ts): two writers racing for the same key, exactly one gets true.
   */
  putBytesIfAbsent(key: string, content: Uint8Array | string): Promise<boolean>;
  /**
   * How `putBytesIfAbsent` is enforced: `atomic` by the store itself (S3 `If-None-Match: *`, a `file://`
   * store's link(2), which fails on an existing name), or `check-then-write` where the server ignores the
   * condition (a HEAD then a PUT: two racing writers may both succeed).
   */
  conditionalWrites(): Promise<'atomic' | 'check-then-write'>;
}

export type StoreLocation = { kind: 'file'; dir: string } | { kind: 's3'; bucket: string; prefix: string };

const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/**
 * Parses a store URI. A plain path (absolute, or relative to `baseDir`) is the same as `file://`: existing
 * local paths keep working.
 */
export function parseStoreUri(uri: string, baseDir = process.cwd()): StoreLocation {
  if (uri.startsWith('s3://')) {
    const rest = uri.slice('s3://'.length);
    const slash = rest.indexOf('/');
    const bucket = slash === -1 ? rest : rest.slice(0, slash);
    const prefix = (slash === -1 ? '' : rest.slice(slash + 1)).replace(/^\/+|\/+$/g, '');
    if (!BUCKET.test(bucket)) {
      throw new StoreConfigError(uri, `artifact store ${uri}: "${bucket}" is not an S3 bucket name (3-63 characters: a-z, 0-9, '.', '-')`);
    }
    if (prefix.split('/').some((part) => part === '.' || part === '..'))
      throw new StoreConfigError(uri, `artifact store ${uri}: the prefix may not contain . or .. segments`);
    return { kind: 's3', bucket, prefix };
  }
  if (uri.startsWith('file://')) return { kind: 'file', dir: fileURLToPath(uri) };
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(uri)) {
    throw new StoreConfigError(uri, `artifact store ${uri}: unknown scheme (use file://<dir>, s3://<bucket>/<prefix>, or a local path)`);
  }
  return { kind: 'file', dir: path.resolve(baseDir, uri) };
}

export function fileStoreUri(dir: string): string {
  return pathToFileURL(path.resolve(dir)).href;
}

/** Checks a key: relative, `/`-separated, no empty, `.` or `..` segments. */
export function checkKey(store: string, key: string): string {
  if (key === '' || key.startsWith('/') || key.split('/').some((part) => part === '' || part === '.' || part === '..')) {
    throw new StoreConfigError(
      store,
      `artifact store ${store}: "${key}" is not a valid object key (a relative path without empty, . or .. segments)`,
    );
  }
  return key;
}

/** Objects in key order (code-unit order, as S3 lists keys), the order `list` returns. */
export function sortByKey(objects: StoredObject[]): StoredObject[] {
  return objects.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

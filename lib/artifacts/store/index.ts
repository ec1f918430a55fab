import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { ArtifactRef } from '../../../schemas/artifact-ref';
import type { ArtifactManifest } from '../../../schemas/artifact-manifest';
import { ArtifactManifestSchema } from '../../../schemas/artifact-manifest';
import { compareWithExpectation, type CacheCheck, type CacheExpectation } from '../cache';
import { manifestPathFor } from '../manifest';
import { openFileStore } from './file-store';
import type { S3StoreSettings } from './s3-settings';
import { openS3Store } from './s3-store';
import { storeSettingsFromProcessEnv, type StoreSettings } from './settings';
import { parseStoreUri, type ArtifactStore, type StoreLocation } from './store';
import { StoreIntegrityError, StoreObjectNotFoundError } from './errors';

export * from './errors';
export { parseStoreUri, fileStoreUri, type ArtifactStore, type StoredObject, type WriteResult, type StoreLocation } from './store';
export { s3SettingsFromEnv, type Environment, type S3StoreSettings } from './s3-settings';
export { defaultLocalCacheDir, storeSettingsFromEnv, storeSettingsFromProcessEnv, type StoreSettings } from './settings';
export { openStoreAppendLog, readStoreAppendLog } from './append-shards';

/**
 * Opens the store a URI names: `file://<dir>`, a plain local path, or `s3://bucket/prefix`. Without `s3`, an
 * `s3://` store is reached with the settings of this process's environment.
 */
export function openArtifactStore(uri: string, s3: S3StoreSettings = storeSettingsFromProcessEnv().s3): ArtifactStore {
  const location = parseStoreUri(uri);
  return location.kind === 'file' ? openFileStore(location.dir) : openS3Store(location.bucket, location.prefix, s3);
}

/**
 * Uploads a finished artifact and then its manifest. The manifest goes last, so it is the commit record: a
 * reader that finds a manifest finds the whole artifact it describes (each object is written atomically).
 * Returns the ref with the store's URI.
 */
export async function publishArtifact(
  store: ArtifactStore,
  key: string,
  localPath: string,
  manifest: ArtifactManifest,
): Promise<ArtifactRef> {
  const written = await store.putFile(key, localPath);
  if (written.sha256 !== manifest.sha256) {
    throw new StoreIntegrityError(
      store.uriOf(key),
      `publishing ${localPath} as ${store.uriOf(key)}: its bytes hash to ${written.sha256}, its manifest says ${manifest.sha256}`,
    );
  }
  const stored: ArtifactManifest = { ...manifest, uri: store.uriOf(key) };
  await store.putBytes(manifestPathFor(key), `${JSON.stringify(stored, null, 2)}\n`);
  return { uri: stored.uri, sha256: stored.sha256, rows: stored.rows, schema: stored.schema, schemaVersion: stored.schemaVersion };
}

/**
 * The store's version of checkCachedArtifact: a hit needs the manifest at `<key>.manifest.json` to match the
 * schema, version, config hash and inputs, and the object to carry the manifest's sha256 (recorded when it was
 * written; a file store's object is hashed).
 */
export async function checkStoredArtifact(store: ArtifactStore, key: string, expect: CacheExpectation): Promise<CacheCheck> {
  const bytes = await store.getBytes(manifestPathFor(key));
  if (bytes === null) return { hit: false, reason: 'no manifest' };
  let manifest: ArtifactManifest;
  try {
    const parsed = ArtifactManifestSchema.safeParse(JSON.parse(bytes.toString('utf8')));
    if (!parsed.success) return { hit: false, reason: `${store.uriOf(manifestPathFor(key))} does not match the manifest schema` };
    manifest = parsed.data;
  } catch (error) {
    return { hit: false, reason: `${store.uriOf(manifestPathFor(key))} is not valid JSON: ${(error as Error).message}` };
  }
  const differs = compareWithExpectation(manifest, expect);
  if (differs) return { hit: false, reason: differs };
  const object = await store.head(key);
  if (!object) return { hit: false, reason: `${store.uriOf(key)} is missing although its manifest exists` };
  let sha = object.sha256;
  if (sha === null) {
    const local = parseStoreUri(store.uriOf(key));
    if (local.kind === 'file') sha = await (await import('../sha256-file')).sha256File(local.dir);
  }
  if (sha !== manifest.sha256) return { hit: false, reason: `${store.uriOf(key)} no longer matches its manifest's sha256` };
  return {
    hit: true,
    ref: {
      uri: store.uriOf(key),
      sha256: manifest.sha256,
      rows: manifest.rows,
      schema: manifest.schema,
      schemaVersion: manifest.schemaVersion,
    },
  };
}

/** `<cacheDir>/sha256/<ab>/<sha256><ext>`: the key's extension is kept, readers pick the format by it. */
function cachedPath(cacheDir: string, sha256: string, key: string): string {
  const ext = path.extname(key).toLowerCase();
  return path.join(cacheDir, 'sha256', sha256.slice(0, 2), `${sha256}${/^\.[a-z0-9]{1,10}$/.test(ext) ? ext : ''}`);
}

/**
 * A node-local copy of a stored object, in a cache keyed by sha256 (`<cacheDir>/sha256/<ab>/<sha256><ext>`): a
 * second read of the same bytes, under any URI with the same extension, downloads nothing. The download is streamed into place atomically and
 * verified against `sha256`.
 */
export async function localCopy(
  store: ArtifactStore,
  key: string,
  sha256: string,
  cacheDir = storeSettingsFromProcessEnv().cacheDir,
): Promise<{ path: string; downloaded: boolean }> {
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw new TypeError(`localCopy ${store.uriOf(key)}: "${sha256}" is not a sha256`);
  const file = cachedPath(cacheDir, sha256, key);
  try {
    if ((await stat(file)).isFile()) return { path: file, downloaded: false };
  } catch {
    // not cached yet
  }
  await mkdir(path.dirname(file), { recursive: true });
  const got = await store.getFile(key, file);
  if (got.sha256 !== sha256) {
    const { rm } = await import('node:fs/promises');
    await rm(file, { force: true });
    throw new StoreIntegrityError(
      store.uriOf(key),
      `artifact store: ${store.uriOf(key)} has sha256 ${got.sha256}, but its ref says ${sha256}`,
    );
  }
  return { path: file, downloaded: true };
}

/** The store of an object's `s3://` URI (the URI's parent) and the object's key in it. */
function openObjectStore(location: Extract<StoreLocation, { kind: 's3' }>, s3: S3StoreSettings): { store: ArtifactStore; key: string } {
  const slash = location.prefix.lastIndexOf('/');
  const store = openS3Store(location.bucket, slash === -1 ? '' : location.prefix.slice(0, slash), s3);
  return { store, key: slash === -1 ? location.prefix : location.prefix.slice(slash + 1) };
}

/**
 * The local path to read the object a URI names: a `file://` URI's or plain path's own path; for `s3://` a
 * node-local copy in the sha256-keyed cache, by the sha256 recorded when the object was written (an object
 * written by another tool, without one, is downloaded and hashed). Every row reader (readRows,
 * readParquetTable) goes through this, so an ArtifactRef whose uri is `s3://…` reads on any node.
 */
export async function localPathForUri(uri: string, settings: StoreSettings = storeSettingsFromProcessEnv()): Promise<string> {
  const location = parseStoreUri(uri);
  if (location.kind === 'file') return location.dir;
  const { store, key } = openObjectStore(location, settings.s3);
  const head = await store.head(key);
  if (!head) throw new StoreObjectNotFoundError(uri, `artifact store: ${uri} does not exist`);
  if (head.sha256 !== null) return (await localCopy(store, key, head.sha256, settings.cacheDir)).path;
  return downloadUnhashed(store, key, settings.cacheDir);
}

/** Downloads an object that carries no sha256 (written by another tool), then files it in the cache by the sha256 it hashed to. */
async function downloadUnhashed(store: ArtifactStore, key: string, cacheDir: string): Promise<string> {
  const { rename } = await import('node:fs/promises');
  await mkdir(path.join(cacheDir, 'incoming'), { recursive: true });
  const incoming = path.join(cacheDir, 'incoming', `${process.pid}-${Date.now()}-${Math.random().toString(16).slice(2)}`);
  const got = await store.getFile(key, incoming);
  const file = cachedPath(cacheDir, got.sha256, key);
  await mkdir(path.dirname(file), { recursive: true });
  await rename(incoming, file);
  return file;
}

/**
 * The local path to read an artifact from: the ref's own path for a local URI, else a node-local cached copy
 * of the stored object (by the ref's sha256). `settings` may be just the cache dir (the `s3://` settings then
 * come from this process's environment).
 */
export async function localPathForRef(
  ref: Pick<ArtifactRef, 'uri' | 'sha256'>,
  settings: StoreSettings | string = storeSettingsFromProcessEnv(),
): Promise<string> {
  const location = parseStoreUri(ref.uri);
  if (location.kind === 'file') return location.dir;
  const { s3, cacheDir } = typeof settings === 'string' ? { ...storeSettingsFromProcessEnv(), cacheDir: settings } : settings;
  const { store, key } = openObjectStore(location, s3);
  return (await localCopy(store, key, ref.sha256, cacheDir)).path;
}
export {
  pushDirectory,
  pullDirectory,
  readDirectoryMarker,
  listTreeFiles,
  DirectoryMarkerSchema,
  type DirectoryMarker,
} from './directories';

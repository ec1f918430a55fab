import type { ArtifactRef } from '../../schemas/artifact-ref';
import { readManifest } from '../artifacts/manifest';
import { localPathForUri } from '../artifacts/store/local-path';
import { publishArtifact, type ArtifactStore, type StoreSettings } from '../artifacts/store';

/**
 * Puts a finished artifact (its ref, as a stage returned it) into the store at `key` with its manifest, and
 * returns the ref with the store's URI (README "Deployment: several machines": the environment stage's samples, before a GPU node reads
 * them). Idempotent: a ref already in the store is returned as is, and an object already stored with the
 * ref's sha256 is not uploaded again.
 */
export async function publishRunArtifact(
  store: ArtifactStore,
  key: string,
  ref: ArtifactRef,
  settings: StoreSettings,
): Promise<ArtifactRef> {
  if (store.keyOf(ref.uri) !== null) return ref;
  await store.ready();
  const head = await store.head(key);
  if (head && head.sha256 === ref.sha256 && (await store.head(`${key}.manifest.json`))) return { ...ref, uri: store.uriOf(key) };
  const local = await localPathForUri(ref.uri, settings);
  const read = await readManifest(local);
  if (read.status !== 'ok')
    throw new Error(`publishing ${ref.uri} to ${store.uriOf(key)}: its manifest is ${read.status === 'missing' ? 'missing' : read.reason}`);
  return publishArtifact(store, key, local, read.manifest);
}

import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import type { ArtifactManifest } from '../../schemas/artifact-manifest';
import { readManifest } from './manifest';
import { sha256File } from './sha256-file';

export type CacheExpectation = {
  schemaName: string;
  schemaVersion: number;
  inputs: ArtifactRef[];
  configHash: string;
};

export type CacheCheck = { hit: true; ref: ArtifactRef } | { hit: false; reason: string };

/**
 * Whether the artifact at `path` can be reused for a stage with these inputs and config, and why not.
 * A hit needs a valid manifest with the same schema, version and config hash, the same input sha256 list
 * (in order), and a file whose bytes still hash to the manifest's sha256: an edited or corrupt file is a
 * miss, never trusted.
 */
export async function checkCachedArtifact(path: string, expect: CacheExpectation): Promise<CacheCheck> {
  const uri = resolve(path);
  const read = await readManifest(uri);
  if (read.status === 'missing') return { hit: false, reason: 'no manifest' };
  if (read.status === 'invalid') return { hit: false, reason: read.reason };
  const manifest = read.manifest;
  const differs = compareWithExpectation(manifest, expect);
  if (differs) return { hit: false, reason: differs };
  try {
    if (!(await stat(uri)).isFile()) return { hit: false, reason: `${uri} is not a file` };
  } catch {
    return { hit: false, reason: `${uri} is missing although its manifest exists` };
  }
  if ((await sha256File(uri)) !== manifest.sha256) return { hit: false, reason: `${uri} no longer matches its manifest's sha256` };
  return {
    hit: true,
    ref: { uri, sha256: manifest.sha256, rows: manifest.rows, schema: manifest.schema, schemaVersion: manifest.schemaVersion },
  };
}

/**
 * Why a manifest does not fit a stage's expectation (schema, version, config hash, input sha256 list in
 * order), or null when it does. Shared by the local check above and the store's (store/index.ts).
 */
export function compareWithExpectation(manifest: ArtifactManifest, expect: CacheExpectation): string | null {
  if (manifest.schema !== expect.schemaName) return `schema is ${manifest.schema}, expected ${expect.schemaName}`;
  if (manifest.schemaVersion !== expect.schemaVersion)
    return `schema version is ${manifest.schemaVersion}, expected ${expect.schemaVersion}`;
  if (manifest.configHash !== expect.configHash) return 'config changed';
  const had = manifest.inputs.map((input) => input.sha256);
  const want = expect.inputs.map((input) => input.sha256);
  if (had.length !== want.length || had.some((sha, i) => sha !== want[i])) return 'inputs changed';
  return null;
}

/** The existing artifact's ref when it is a valid cache hit (see checkCachedArtifact), else null. */
export async function findCachedArtifact(path: string, expect: CacheExpectation): Promise<ArtifactRef | null> {
  const check = await checkCachedArtifact(path, expect);
  return check.hit ? check.ref : null;
}

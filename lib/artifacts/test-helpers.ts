import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import { hashConfig } from './config-hash';

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
export const sharedDataDir = join(repoRoot, '../shared/data');

/** A fresh directory under the OS temp dir, removed by the returned cleanup. */
export async function makeTempDir(): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'codegrep-artifacts-'));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

export function fakeInputRef(seed: string): ArtifactRef {
  return { uri: `/inputs/${seed}.parquet`, sha256: hashConfig({ seed }), rows: 3, schema: 'input', schemaVersion: 1 };
}

import path from 'node:path';
import { sha256File } from './sha256-file';
import type { ArtifactRef } from '../../schemas/artifact-ref';

/**
 * A user-provided input file as an ArtifactRef, so a stage's cache key covers its bytes (not its name):
 * replacing the trajectories or instances file invalidates the stages made from it.
 */
export async function sourceRef(file: string): Promise<ArtifactRef> {
  return {
    uri: path.resolve(file),
    sha256: await sha256File(file),
    rows: 0,
    schema: `source${path.extname(file).toLowerCase() || ':unknown'}`,
    schemaVersion: 1,
  };
}

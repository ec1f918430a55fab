import path from 'node:path';
import { readManifest, refFromManifest } from '../lib/artifacts';
import type { ArtifactRef } from '../schemas/artifact-ref';
import { invalidInput } from './kit';

/**
 * The ref of an artifact an earlier run of a stage left in the run directory, for stages started on their own
 * (e.g. `environment` without `catm` in the same pipeline). Fails clearly when the stage has not run.
 */
export async function findRunArtifact(input: { runDir: string; relativePath: string; producedBy: string }): Promise<ArtifactRef> {
  const uri = path.join(input.runDir, input.relativePath);
  const read = await readManifest(uri);
  if (read.status !== 'ok') {
    const why = read.status === 'missing' ? 'no manifest' : read.reason;
    throw invalidInput(`${uri} is not there (${why}): run the ${input.producedBy} stage first, or include it in stages`);
  }
  return refFromManifest(read.manifest);
}

import { sourceRef } from '../../lib/artifacts';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import { invalidInput } from './failures';

/**
 * The `ArtifactRef` of an input file a stage starts from (its sha256 keys the stage's cache). A file that is
 * missing or unreadable is the user's input being wrong, so it fails non-retryable `InvalidInput` naming
 * `what` and the path, instead of being retried.
 */
export async function inputSource(what: string, file: string): Promise<ArtifactRef> {
  try {
    return await sourceRef(file);
  } catch (error) {
    throw invalidInput(`${what} ${file}: ${(error as Error).message}`);
  }
}

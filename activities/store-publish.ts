import { z } from 'zod';
import { publishRunArtifact } from '../lib/store-sync';
import { openRunStore, type ActivityDeps } from './kit';
import { ArtifactRefSchema, type ArtifactRef } from '../schemas/artifact-ref';
import { StoreUriSchema } from '../schemas/store';

export const PublishToStoreInputSchema = z.object({
  store: StoreUriSchema,
  runId: z.string().min(1),
  /** The artifact's key below `<store>/<runId>/`, e.g. `environment/samples.parquet`. */
  key: z.string().min(1),
  ref: ArtifactRefSchema,
});
export type PublishToStoreInput = z.input<typeof PublishToStoreInputSchema>;

/**
 * Puts a run artifact a CPU stage wrote (the environment stage's samples) into the run's store,
 * with its manifest, and returns the ref with the store's `s3://` (or `file://`) URI, so a node that shares no
 * disk with this one (a GPU node) can read it. Idempotent: an artifact already stored is not uploaded again.
 */
export function makePublishToStore(deps: Pick<ActivityDeps, 'store'>): (input: PublishToStoreInput) => Promise<ArtifactRef> {
  return async (rawInput) => {
    const input = PublishToStoreInputSchema.parse(rawInput);
    return publishRunArtifact(openRunStore(deps, input.store), `${input.runId}/${input.key}`, input.ref, deps.store);
  };
}

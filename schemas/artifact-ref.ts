import { z } from 'zod';

/**
 * What activities pass between stages instead of rows (Temporal payloads cap at 2 MB): a pointer to a
 * Parquet (or JSON) artifact on disk plus what is needed to trust it.
 */
export const ArtifactRefSchema = z.object({
  uri: z.string().min(1),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  rows: z.number().int().nonnegative(),
  schema: z.string().min(1),
  schemaVersion: z.number().int().positive(),
});
export type ArtifactRef = z.infer<typeof ArtifactRefSchema>;

import { z } from 'zod';
import { ArtifactRefSchema } from './artifact-ref';

const Sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, 'expected a lowercase hex sha256 (64 characters)');

/**
 * The sidecar `<artifact>.manifest.json` written next to every artifact (docs/design.md "Artifacts"): what the file holds
 * (schema, version, rows, sha256 of its bytes), what it was made from (input refs, config hash) and by which
 * code. A stage whose manifest matches its inputs and config is a cache hit.
 */
export const ArtifactManifestSchema = z.object({
  schema: z.string().min(1),
  schemaVersion: z.number().int().positive(),
  rows: z.number().int().nonnegative(),
  sha256: Sha256Hex,
  /** Absolute path of the artifact when it was written. */
  uri: z.string().min(1),
  inputs: z.array(ArtifactRefSchema),
  /** `hashConfig(config)` of the stage config that produced the artifact. */
  configHash: Sha256Hex,
  /** Git HEAD short sha of the code that wrote it, or the package version outside a git checkout. */
  codeVersion: z.string().min(1),
  createdAt: z.iso.datetime(),
});
export type ArtifactManifest = z.infer<typeof ArtifactManifestSchema>;

/** What a writer must be told about an artifact besides its rows: checked before any work is done. */
export const ArtifactProvenanceSchema = z.object({
  schemaName: z.string().min(1),
  schemaVersion: z.number().int().positive(),
  inputs: z.array(ArtifactRefSchema),
  configHash: Sha256Hex,
});
export type ArtifactProvenance = z.infer<typeof ArtifactProvenanceSchema>;

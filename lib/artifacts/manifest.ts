import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import {
  ArtifactManifestSchema,
  ArtifactProvenanceSchema,
  type ArtifactManifest,
  type ArtifactProvenance,
} from '../../schemas/artifact-manifest';
import { writeBytesAtomically } from './atomic-write';
import { codeVersion } from './code-version';

/** The manifest of the artifact at `artifactPath` lives next to it. */
export function manifestPathFor(artifactPath: string): string {
  return `${artifactPath}.manifest.json`;
}

/**
 * Checks a writer's provenance before any work is done, so a bad schema name or config hash fails at once
 * instead of after a long write. `what` names the artifact in the error.
 */
export function parseProvenance(provenance: unknown, what: string): ArtifactProvenance {
  const parsed = ArtifactProvenanceSchema.safeParse(provenance);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new TypeError(`Invalid provenance for artifact ${what}: ${issues}`);
  }
  return parsed.data;
}

/**
 * Writes the manifest of a finished artifact (atomically, after the artifact itself was renamed into place)
 * and returns the ref activities pass on.
 */
export async function writeManifest(
  artifactPath: string,
  facts: { rows: number; sha256: string; provenance: ArtifactProvenance },
): Promise<ArtifactRef> {
  const uri = resolve(artifactPath);
  const manifest: ArtifactManifest = ArtifactManifestSchema.parse({
    schema: facts.provenance.schemaName,
    schemaVersion: facts.provenance.schemaVersion,
    rows: facts.rows,
    sha256: facts.sha256,
    uri,
    inputs: facts.provenance.inputs,
    configHash: facts.provenance.configHash,
    codeVersion: await codeVersion(),
    createdAt: new Date().toISOString(),
  });
  await writeBytesAtomically(manifestPathFor(uri), `${JSON.stringify(manifest, null, 2)}\n`);
  return refFromManifest(manifest);
}

export type ManifestReadResult =
  { status: 'ok'; manifest: ArtifactManifest } | { status: 'missing' } | { status: 'invalid'; reason: string };

/** Reads and validates the manifest next to `artifactPath`; a missing or unreadable manifest is reported, not thrown. */
export async function readManifest(artifactPath: string): Promise<ManifestReadResult> {
  const path = manifestPathFor(resolve(artifactPath));
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { status: 'missing' };
    return { status: 'invalid', reason: `cannot read ${path}: ${(err as Error).message}` };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    return { status: 'invalid', reason: `${path} is not valid JSON: ${(err as Error).message}` };
  }
  const parsed = ArtifactManifestSchema.safeParse(json);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    return { status: 'invalid', reason: `${path} does not match the manifest schema: ${issues}` };
  }
  return { status: 'ok', manifest: parsed.data };
}

export function refFromManifest(manifest: ArtifactManifest): ArtifactRef {
  return {
    uri: manifest.uri,
    sha256: manifest.sha256,
    rows: manifest.rows,
    schema: manifest.schema,
    schemaVersion: manifest.schemaVersion,
  };
}

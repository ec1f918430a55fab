import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import { writeBytesAtomically } from './atomic-write';
import { assertReadableFile, InputFileError } from './input-file-error';
import { parseProvenance, writeManifest } from './manifest';

export type JsonArtifactOptions = {
  schemaName: string;
  schemaVersion: number;
  inputs: ArtifactRef[];
  configHash: string;
};

/**
 * Writes a small JSON artifact (a summary, a report) atomically with the same manifest as a Parquet artifact;
 * it counts as one row. For anything row-shaped or large use writeParquetArtifact.
 */
export async function writeJsonArtifact(path: string, value: unknown, options: JsonArtifactOptions): Promise<ArtifactRef> {
  const provenance = parseProvenance(options, path);
  const text = JSON.stringify(value, null, 2);
  if (text === undefined) throw new TypeError(`writeJsonArtifact ${path}: the value (${typeof value}) has no JSON form`);
  const absolute = resolve(path);
  const { sha256 } = await writeBytesAtomically(absolute, `${text}\n`);
  return writeManifest(absolute, { rows: 1, sha256, provenance });
}

/** Reads back a JSON artifact written by writeJsonArtifact. */
export async function readJsonArtifact(uri: string): Promise<unknown> {
  await assertReadableFile(uri);
  const text = await readFile(uri, 'utf8');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new InputFileError(uri, `JSON artifact ${uri} is not valid JSON: ${(err as Error).message}`);
  }
}

import path from 'node:path';
import { findCachedArtifact, type CacheExpectation } from '../artifacts';
import type { ArtifactRef } from '../../schemas/artifact-ref';

/**
 * One output of a CATM stage: its path and its cache key, one object serving both the cache check and the write,
 * so the two cannot disagree.
 */
export type StageOutput = CacheExpectation & { path: string };

/** `<runDir>/catm/<file>`, where the CATM stages write. */
export function catmPath(runDir: string, file: string): string {
  return path.join(runDir, 'catm', file);
}

/** The JSON summary a CATM stage writes beside its artifacts: `catm/<stage>-summary.json`, schema `catm.<stage>-summary`. */
export function catmSummaryOutput(runDir: string, stage: 'mining' | 'weight', inputs: ArtifactRef[], configHash: string): StageOutput {
  return { path: catmPath(runDir, `${stage}-summary.json`), schemaName: `catm.${stage}-summary`, schemaVersion: 1, inputs, configHash };
}

/** Every output's ref when each one is a cache hit, else null: a stage whose outputs are not all there is redone. */
export async function cachedOutputs<K extends string>(outputs: Record<K, StageOutput>): Promise<Record<K, ArtifactRef> | null> {
  const refs = {} as Record<K, ArtifactRef>;
  for (const name of Object.keys(outputs) as K[]) {
    const ref = await findCachedArtifact(outputs[name].path, outputs[name]);
    if (ref === null) return null;
    refs[name] = ref;
  }
  return refs;
}

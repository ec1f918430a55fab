import path from 'node:path';
import { hashConfig, writeJsonArtifact } from '../lib/artifacts';
import type { ArtifactRef } from '../schemas/artifact-ref';
import { WriteSummaryInputSchema, type WriteSummaryInput } from '../schemas/catm';

/** The CATM stage summary artifact (`catm/summary.json`): what the CLI's table and the report show. */
export async function writeCatmSummary(rawInput: WriteSummaryInput): Promise<ArtifactRef> {
  const input = WriteSummaryInputSchema.parse(rawInput);
  return writeJsonArtifact(path.join(input.runDir, 'catm', 'summary.json'), input.summary, {
    schemaName: 'catm.summary',
    schemaVersion: 1,
    inputs: input.inputs,
    configHash: hashConfig({ stage: 'catm-summary' }),
  });
}

import path from 'node:path';
import { log } from '@temporalio/activity';
import { findCachedArtifact, hashConfig, readJsonArtifact, readRows, writeJsonArtifact, writeParquetArtifact } from '../lib/artifacts';
import { MIN_REASONING_TOKENS } from '../lib/trajectories/catm-parameters';
import { mineTrajectories } from '../lib/trajectories/mine-trajectories';
import { MineInputSchema, type MineInput, type MineOutput } from '../schemas/catm';
import {
  MINED_CANDIDATES_SCHEMA_NAME,
  MINED_CANDIDATES_SCHEMA_VERSION,
  MiningSummarySchema,
  minedCandidatesArrowSchema,
} from '../schemas/mining';
import { inputSource, ProgressReporter, rethrowAsFailure } from './kit';

const SUMMARY_SCHEMA = { name: 'catm.mining-summary', version: 1 } as const;

/** CATM stage 1 (CodeGrep §3.4): stream the trajectories, write the candidates that pass the token filter. */
export async function mine(rawInput: MineInput): Promise<MineOutput> {
  const input = MineInputSchema.parse(rawInput);
  const outDir = path.join(input.runDir, 'catm');
  const candidatesPath = path.join(outDir, 'candidates.parquet');
  const summaryPath = path.join(outDir, 'mining-summary.json');
  const source = await inputSource('trajectories', input.trajectoriesPath);
  const configHash = hashConfig({ stage: 'mine', minReasoningTokens: MIN_REASONING_TOKENS, tokenizer: 'qwen3' });
  const expect = { inputs: [source], configHash };

  const cachedCandidates = await findCachedArtifact(candidatesPath, {
    ...expect,
    schemaName: MINED_CANDIDATES_SCHEMA_NAME,
    schemaVersion: MINED_CANDIDATES_SCHEMA_VERSION,
  });
  const cachedSummary = await findCachedArtifact(summaryPath, {
    ...expect,
    schemaName: SUMMARY_SCHEMA.name,
    schemaVersion: SUMMARY_SCHEMA.version,
  });
  if (cachedCandidates && cachedSummary) {
    log.info('mine: cache hit', { candidates: cachedCandidates.uri });
    return { candidates: cachedCandidates, summary: MiningSummarySchema.parse(await readJsonArtifact(cachedSummary.uri)), cached: true };
  }

  const progress = new ProgressReporter();
  const run = mineTrajectories(readRows(input.trajectoriesPath), {
    onProgress: (p) =>
      progress.report({
        stage: 'mine',
        done: p.rowsRead,
        total: null,
        unit: 'trajectories',
        counts: { candidates: p.candidatesEmitted },
      }),
  });
  let candidates;
  try {
    candidates = await writeParquetArtifact({
      path: candidatesPath,
      schemaName: MINED_CANDIDATES_SCHEMA_NAME,
      schemaVersion: MINED_CANDIDATES_SCHEMA_VERSION,
      arrowSchema: minedCandidatesArrowSchema,
      rows: run.candidates,
      inputs: [source],
      configHash,
    });
  } catch (error) {
    progress.close();
    rethrowAsFailure(error);
  }
  const summary = run.summary();
  await writeJsonArtifact(summaryPath, summary, {
    schemaName: SUMMARY_SCHEMA.name,
    schemaVersion: SUMMARY_SCHEMA.version,
    inputs: [source],
    configHash,
  });
  const skippedRows = Object.values(summary.rowsSkipped).reduce((a, b) => a + b, 0);
  log.info('mine: done', { rowsRead: summary.rowsRead, skippedRows, candidates: candidates.rows });
  progress.report({
    stage: 'mine',
    done: summary.rowsRead,
    total: summary.rowsRead,
    unit: 'trajectories',
    counts: { candidates: candidates.rows },
  });
  await progress.flush();
  return { candidates, summary, cached: false };
}

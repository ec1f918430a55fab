import { log } from '@temporalio/activity';
import { hashConfig, readJsonArtifact, readRows, writeJsonArtifact, writeParquetArtifact } from '../lib/artifacts';
import { cachedOutputs, catmPath, catmSummaryOutput } from '../lib/labels/catm-outputs';
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

/** CATM stage 1 (CodeGrep §3.4): stream the trajectories, write the candidates that pass the token filter. */
export async function mine(rawInput: MineInput): Promise<MineOutput> {
  const input = MineInputSchema.parse(rawInput);
  const source = await inputSource('trajectories', input.trajectoriesPath);
  const configHash = hashConfig({ stage: 'mine', minReasoningTokens: MIN_REASONING_TOKENS, tokenizer: 'qwen3' });
  const outputs = {
    candidates: {
      path: catmPath(input.runDir, 'candidates.parquet'),
      schemaName: MINED_CANDIDATES_SCHEMA_NAME,
      schemaVersion: MINED_CANDIDATES_SCHEMA_VERSION,
      inputs: [source],
      configHash,
    },
    summary: catmSummaryOutput(input.runDir, 'mining', [source], configHash),
  };
  const cached = await cachedOutputs(outputs);
  if (cached) {
    log.info('mine: cache hit', { candidates: cached.candidates.uri });
    return { candidates: cached.candidates, summary: MiningSummarySchema.parse(await readJsonArtifact(cached.summary.uri)), cached: true };
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
    candidates = await writeParquetArtifact({ ...outputs.candidates, arrowSchema: minedCandidatesArrowSchema, rows: run.candidates });
  } catch (error) {
    progress.close();
    rethrowAsFailure(error);
  }
  const summary = run.summary();
  await writeJsonArtifact(outputs.summary.path, summary, outputs.summary);
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

import {
  parseTrajectoryRow,
  TRAJECTORY_ROW_FIELDS,
  type MinedCandidate,
  type MiningSummary,
  type TrajectoryRowField,
} from '../../schemas/mining';
import type { RowRecord } from '../../schemas/rows';
import { countTokens } from '../tokenizer/qwen3';
import { MIN_REASONING_TOKENS } from './catm-parameters';
import { mineTrajectory } from './mine-trajectory';
import { MiningTally } from './mining-tally';

export type MiningProgress = { rowsRead: number; trajectoriesMined: number; candidatesEmitted: number };

export type MineOptions = {
  /** Candidates with fewer post-reasoning tokens are dropped before judging (default 30, Table 5). */
  minReasoningTokens?: number;
  /** Called after every row; throttle on the caller's side if it heartbeats. */
  onProgress?(progress: MiningProgress): void;
};

export type MiningRun = {
  /** Candidates that pass the reasoning-length filter, trajectory by trajectory, in row order. */
  candidates: AsyncGenerator<MinedCandidate, void, undefined>;
  /** The counts so far; final once `candidates` is exhausted. */
  summary(): MiningSummary;
};

/**
 * CATM stage 1 over a stream of trajectory rows. Streams: memory holds one row and its per-path map. A bad row,
 * message or view is counted by reason in the summary and never stops the pass.
 */
export function mineTrajectories(rows: AsyncIterable<RowRecord>, opts: MineOptions = {}): MiningRun {
  const minReasoningTokens = opts.minReasoningTokens ?? MIN_REASONING_TOKENS;
  if (!Number.isInteger(minReasoningTokens) || minReasoningTokens < 0) {
    throw new RangeError(`mineTrajectories: minReasoningTokens must be a non-negative integer, got ${minReasoningTokens}`);
  }
  const tally = new MiningTally(minReasoningTokens);

  async function* candidates(): AsyncGenerator<MinedCandidate, void, undefined> {
    for await (const record of rows) {
      tally.rowsRead++;
      const mined = mineRecord(record);
      for (const candidate of mined) {
        tally.candidates++;
        if (candidate.postReasoningTokens < minReasoningTokens) {
          tally.candidatesBelowTokenFilter++;
          continue;
        }
        tally.candidatesAfterTokenFilter++;
        yield candidate;
      }
      opts.onProgress?.({
        rowsRead: tally.rowsRead,
        trajectoriesMined: tally.trajectoriesMined,
        candidatesEmitted: tally.candidatesAfterTokenFilter,
      });
    }
  }

  function mineRecord(record: RowRecord): MinedCandidate[] {
    if ('error' in record) {
      tally.skipRow('malformedRow', record.ordinal, null, record.error);
      return [];
    }
    const value = record.row;
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      tally.skipRow(
        'malformedRow',
        record.ordinal,
        null,
        `not an object: ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`,
      );
      return [];
    }
    const parsed = parseTrajectoryRow(value as Record<string, unknown>);
    if (!parsed.success) {
      const fields = new Set(parsed.error.issues.map((issue) => String(issue.path[0])));
      const field: TrajectoryRowField = TRAJECTORY_ROW_FIELDS.find((f) => fields.has(f)) ?? 'trajectory';
      const issue = parsed.error.issues.find((i) => i.path[0] === field);
      const id = (value as Record<string, unknown>).trajectory_id;
      tally.skipRow(
        `missingOrInvalid:${field}`,
        record.ordinal,
        typeof id === 'string' ? id : null,
        `column ${field}: ${issue?.message ?? 'invalid'}`,
      );
      return [];
    }
    tally.trajectoriesMined++;
    return mineTrajectory(parsed.data, record.ordinal, tally, countTokens);
  }

  return { candidates: candidates(), summary: () => tally.summary() };
}

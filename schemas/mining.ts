import { z } from 'zod';
import { columns, int32, utf8 } from './columns';

/**
 * CATM stage 1 (CodeGrep §3.4, App. A.2): the trajectory rows it reads and the candidates it writes.
 */

/**
 * One trajectory row (layout of the 67K OpenHands trajectory dataset, shared/data/README.md). Only the
 * columns mining needs are checked; messages are checked one by one by the miner so that one bad message does
 * not cost the row. Parquet readers may hand `trajectory` over as a JSON string: parseTrajectoryRow decodes it.
 */
export const TRAJECTORY_ROW_FIELDS = ['trajectory_id', 'instance_id', 'repo', 'trajectory'] as const;
export type TrajectoryRowField = (typeof TRAJECTORY_ROW_FIELDS)[number];

export const TrajectoryRowSchema = z.object({
  trajectory_id: z.string().min(1),
  instance_id: z.string().min(1),
  /** `owner/name`, as in SWE-bench. */
  repo: z.string().regex(/^[^/\s]+\/[^/\s]+$/, 'expected "owner/name"'),
  trajectory: z.array(z.unknown()),
});
export type TrajectoryRow = z.infer<typeof TrajectoryRowSchema>;

/**
 * TrajectoryRowSchema.safeParse, decoding a `trajectory` given as a JSON string first. (Not a z.preprocess:
 * that made zod hold on to every row long enough to multiply garbage-collection time by ten in the miner.)
 */
export function parseTrajectoryRow(row: Record<string, unknown>): ReturnType<typeof TrajectoryRowSchema.safeParse> {
  if (typeof row.trajectory !== 'string') return TrajectoryRowSchema.safeParse(row);
  let trajectory: unknown = row.trajectory;
  try {
    trajectory = JSON.parse(row.trajectory) as unknown;
  } catch {
    // Left as the string: the schema then reports the column as not an array.
  }
  return TrajectoryRowSchema.safeParse({ ...row, trajectory });
}

/**
 * One mined candidate: a file some agent viewed in one trajectory, with the longest post-reasoning that
 * followed any of its views (App. A.2). One row per (trajectoryId, path).
 */
export const minedCandidateColumns = columns({
  trajectoryId: utf8(),
  instanceId: utf8(),
  /** `owner/name`. */
  repo: utf8(),
  /** Repository-relative, forward slashes, no leading `/` (lib/paths/normalize). */
  path: utf8(),
  /** `content` of the first assistant message after the view's turn (the longest such, over all views). */
  postReasoning: utf8(),
  /** l(f): Qwen3 tokens of `postReasoning`. */
  postReasoningTokens: int32(z.number().int().nonnegative()),
  /** Views of this path in this trajectory that survived every filter (all of them count, not just the kept one). */
  viewCount: int32(z.number().int().positive()),
  /** 0-based index, in the row's `trajectory` array, of the assistant message that first viewed the path. */
  firstTurnIndex: int32(z.number().int().nonnegative()),
  /** 0-based index, in the row's `trajectory` array, of the assistant message whose content is `postReasoning`. */
  postReasoningTurnIndex: int32(z.number().int().nonnegative()),
});
export const MinedCandidateSchema = minedCandidateColumns.zod;
export type MinedCandidate = z.infer<typeof MinedCandidateSchema>;

export const MINED_CANDIDATES_SCHEMA_NAME = 'catm.mined-candidates';
export const MINED_CANDIDATES_SCHEMA_VERSION = 1;

export const minedCandidatesArrowSchema = minedCandidateColumns.arrowSchema();

/** Why a whole row was not mined. `missingOrInvalid:<column>` names the first bad column. */
export const ROW_SKIP_REASONS = ['malformedRow', ...TRAJECTORY_ROW_FIELDS.map((field) => `missingOrInvalid:${field}` as const)] as const;
export type RowSkipReason = (typeof ROW_SKIP_REASONS)[number];

/**
 * Why one view call was not mined, in the order the checks run (a view is counted under the first that fails).
 * `nonJsonArguments` counts str_replace_editor calls whose arguments cannot be read, since they may be views.
 */
export const VIEW_SKIP_REASONS = [
  'nonJsonArguments',
  'missingPath',
  'outsideRepo',
  'repoMismatch',
  'directory',
  'documentation',
  'extensionless',
  'errorObservation',
  'noFollowingAssistant',
] as const;
export type ViewSkipReason = (typeof VIEW_SKIP_REASONS)[number];

/** Messages and tool calls ignored inside an otherwise good row. */
export const MESSAGE_SKIP_REASONS = ['malformedMessage', 'malformedToolCall'] as const;
export type MessageSkipReason = (typeof MESSAGE_SKIP_REASONS)[number];

const countsOf = <const T extends readonly string[]>(reasons: T) =>
  z.object(Object.fromEntries(reasons.map((r) => [r, z.number().int().nonnegative()])) as { [K in T[number]]: z.ZodNumber });

/**
 * Every count adds up:
 *   rowsRead   = trajectoriesMined + Σ rowsSkipped
 *   viewCalls  = viewsMined + Σ viewsSkipped
 *   candidates = candidatesAfterTokenFilter + candidatesBelowTokenFilter
 * (candidates = distinct (trajectory, path) among the mined views).
 */
export const MiningSummarySchema = z.object({
  rowsRead: z.number().int().nonnegative(),
  trajectoriesMined: z.number().int().nonnegative(),
  rowsSkipped: countsOf(ROW_SKIP_REASONS),
  messagesSkipped: countsOf(MESSAGE_SKIP_REASONS),
  /** str_replace_editor calls with command "view", plus those whose arguments could not be read. */
  viewCalls: z.number().int().nonnegative(),
  viewsSkipped: countsOf(VIEW_SKIP_REASONS),
  viewsMined: z.number().int().nonnegative(),
  candidates: z.number().int().nonnegative(),
  candidatesBelowTokenFilter: z.number().int().nonnegative(),
  candidatesAfterTokenFilter: z.number().int().nonnegative(),
  minReasoningTokens: z.number().int().nonnegative(),
  /** The first few skips with where they happened, so a bad input can be found without rerunning. */
  examples: z.array(
    z.object({
      ordinal: z.number().int(),
      trajectoryId: z.string().nullable(),
      reason: z.string(),
      detail: z.string(),
    }),
  ),
});
export type MiningSummary = z.infer<typeof MiningSummarySchema>;

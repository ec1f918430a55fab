import { z } from 'zod';
import { columns, float64, int32, nullable, nullish, utf8 } from './columns';

/**
 * CATM stage 2 (CodeGrep §3.4, App. A.2): a mined file view goes in as a JudgeCandidate, a Judgement comes out.
 * Judgements are the `judgements` artifact: appended to shards while the judge runs, then written as Parquet.
 */

export const JudgeCandidateSchema = z.object({
  trajectoryId: z.string().min(1),
  instanceId: z.string().min(1),
  repo: z.string().min(1),
  /** Repo-relative path of the viewed file. */
  path: z.string().min(1),
  problemStatement: z.string(),
  /** The next assistant message after the view (the "post-reasoning"). */
  postReasoning: z.string(),
  /** l(f): post-reasoning length in tokens of the policy's tokenizer. */
  postReasoningTokens: z.number().int().nonnegative(),
});
export type JudgeCandidate = z.infer<typeof JudgeCandidateSchema>;

/**
 * RELEVANT / NOT_RELEVANT: the judge said so explicitly. DEFAULTED: the reply was not explicit (or the call
 * failed after every retry, then `error` says why) and the file is kept, as the paper's conservative bias
 * asks. SKIPPED: no judge configured (`judge: none`); the file is kept unjudged.
 */
export const JUDGE_VERDICTS = ['RELEVANT', 'NOT_RELEVANT', 'DEFAULTED', 'SKIPPED'] as const;
export const JudgeVerdictSchema = z.enum(JUDGE_VERDICTS);
export type JudgeVerdict = z.infer<typeof JudgeVerdictSchema>;

/** Verdicts that keep the file for weighting: everything but an explicit NOT_RELEVANT. */
export function keepsFile(verdict: JudgeVerdict): boolean {
  return verdict !== 'NOT_RELEVANT';
}

export const JUDGE_REPLY_MAX_CHARS = 500;

/** One judged candidate: a row of the `judgements` artifact. */
export const judgementColumns = columns({
  trajectoryId: utf8(z.string().min(1)),
  instanceId: utf8(z.string().min(1)),
  path: utf8(z.string().min(1)),
  verdict: utf8(JudgeVerdictSchema),
  /**
   * The judge's answer with <think> blocks removed (the raw reply when nothing else is left), cut to
   * JUDGE_REPLY_MAX_CHARS; empty when no reply was received.
   */
  reply: utf8(z.string().max(JUDGE_REPLY_MAX_CHARS)),
  /** HTTP attempts spent on this candidate; 0 when no request was made. */
  attempts: int32(z.number().int().nonnegative()),
  /** The model asked; null when no judge ran (`judge: none`). */
  model: nullable(utf8()),
  /** Wall time for this candidate, retries and backoff included. */
  latencyMs: float64(z.number().nonnegative()),
  /** Set when the call failed after every retry (the verdict is then DEFAULTED). Parquet gives null back. */
  error: nullish(utf8()),
});
export const JudgementSchema = judgementColumns.zod;
export type Judgement = z.infer<typeof JudgementSchema>;

export const JUDGEMENT_SCHEMA_NAME = 'catm.judgements';
export const JUDGEMENT_SCHEMA_VERSION = 1;

/** The judgements Parquet's column types, from the same column list (lib/artifacts writes it and stamps name and version). */
export const judgementArrowSchema = judgementColumns.arrowSchema();

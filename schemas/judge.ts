import { Field, Float64, Int32, Schema, Utf8 } from 'apache-arrow';
import { z } from 'zod';

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

export const JudgementSchema = z.object({
  trajectoryId: z.string().min(1),
  instanceId: z.string().min(1),
  path: z.string().min(1),
  verdict: JudgeVerdictSchema,
  /**
   * The judge's answer with <think> blocks removed (the raw reply when nothing else is left), cut to
   * JUDGE_REPLY_MAX_CHARS; empty when no reply was received.
   */
  reply: z.string().max(JUDGE_REPLY_MAX_CHARS),
  /** HTTP attempts spent on this candidate; 0 when no request was made. */
  attempts: z.number().int().nonnegative(),
  /** The model asked; null when no judge ran (`judge: none`). */
  model: z.string().nullable(),
  /** Wall time for this candidate, retries and backoff included. */
  latencyMs: z.number().nonnegative(),
  /** Set when the call failed after every retry (the verdict is then DEFAULTED). Parquet gives null back. */
  error: z.string().nullish(),
});
export type Judgement = z.infer<typeof JudgementSchema>;

export const JUDGEMENT_SCHEMA_NAME = 'catm.judgements';
export const JUDGEMENT_SCHEMA_VERSION = 1;

/** Explicit column types for the judgements Parquet (lib/artifacts writes it and stamps name and version). */
export const judgementArrowSchema = new Schema([
  new Field('trajectoryId', new Utf8(), false),
  new Field('instanceId', new Utf8(), false),
  new Field('path', new Utf8(), false),
  new Field('verdict', new Utf8(), false),
  new Field('reply', new Utf8(), false),
  new Field('attempts', new Int32(), false),
  new Field('model', new Utf8(), true),
  new Field('latencyMs', new Float64(), false),
  new Field('error', new Utf8(), true),
]);

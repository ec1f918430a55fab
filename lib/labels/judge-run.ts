import type { JudgeCandidate, Judgement } from '../../schemas/judge';
import { createLlmClient } from '../llm/client';
import { DEFAULT_LLM_CONCURRENCY } from '../llm/concurrency';
import type { LlmEndpoint } from '../llm/endpoint';
import { LlmError } from '../llm/errors';
import { createOrderedExecutor, type ExecutorStep } from '../llm/ordered-executor';
import { DEFAULT_RETRY_POLICY, resolveRetryPolicy, type RetryPolicy } from '../llm/retry';
import { judgeOne, type JudgeCall } from './judge-one';
import { DEFAULT_JUDGE_PROMPT_LIMITS, type JudgePromptLimits } from './judge-prompt';
import { createCandidateGate } from './judge-resume';

export { truncateReply } from './judge-one';
export { judgementKey } from './judge-resume';

/**
 * Running the CATM stage-2 judge over a stream of candidates (CodeGrep §3.4, App. A.2: 16 parallel calls,
 * 60 s per call, resumable with real-time appends). Candidates arrive already filtered by stage 1 (the
 * reasoning_tokens ≥ 30 threshold lives in lib/trajectories/catm-parameters.ts); every valid candidate is judged.
 *
 * Durability is the caller's: every judgement goes to `onJudgement` as soon as it is known (one call at a
 * time, in completion order), and a slot is freed only after `onJudgement` resolved, so a slow sink slows the
 * judge instead of piling results up in memory. A kill therefore loses at most the calls in flight. On resume
 * the caller passes the keys it already holds as `alreadyJudged` (`judgementKey(trajectoryId, path)`); those
 * candidates are skipped without a request.
 *
 * Failure policy:
 *  - A call that still fails after every retry (429/5xx/timeouts/connection/malformed body), or that the server
 *    rejects as a bad request (400/413/422 …), is recorded as DEFAULTED with `error` set, counted in `errors`
 *    (not in `defaulted`), and the run goes on: the paper's conservative default keeps the file, and one bad
 *    item never loses the others. Such rows are final for `alreadyJudged` purposes; a caller that wants them
 *    re-asked on the next run leaves rows with `error` out of `alreadyJudged` (the newer row then supersedes).
 *  - `maxConsecutiveErrors` failures in a row with no success in between mean the endpoint is down, not that
 *    some items are hard: the run stops, cancels the calls in flight (asked again on resume) and throws
 *    JudgeEndpointFailingError (retryable), instead of defaulting every remaining file to RELEVANT.
 *  - 401/403 (LlmAuthError) and 404 (LlmNotFoundError) abort the whole run at once: every further call would
 *    fail the same way. Judgements already known are still delivered; calls in flight are cancelled.
 *  - `onJudgement` throwing, or the input stream throwing, also aborts the run with that error.
 *  - Aborting `signal` cancels the calls in flight and rejects with the signal's reason.
 *
 * The pieces: judge-resume.ts (which candidates still need a verdict), lib/llm/ordered-executor.ts (bounded
 * concurrency, one item of read-ahead, one delivery at a time, stop and abort), judge-one.ts (one request, its
 * retries, the verdict). This file wires them and keeps the counts.
 */

export interface JudgeRunCounts {
  /** Candidates read from the input. */
  candidates: number;
  /** Skipped because `alreadyJudged` holds their key: judged by an earlier attempt, not asked again. */
  resumed: number;
  /** A second candidate with a key already handled in this run. */
  duplicates: number;
  /** Not a valid JudgeCandidate (no judgement row; see `invalidExamples`). */
  invalid: number;
  relevant: number;
  notRelevant: number;
  /** Unclear replies kept as relevant. */
  defaulted: number;
  /** Calls that failed after every retry; recorded as DEFAULTED with `error`. */
  errors: number;
  /** `judge: none`: kept unjudged. */
  skipped: number;
  /** HTTP requests sent, retries included. */
  requests: number;
  inFlight: number;
}

export interface JudgeRunOptions {
  candidates: AsyncIterable<JudgeCandidate> | Iterable<JudgeCandidate>;
  alreadyJudged: ReadonlySet<string>;
  /** null: `judge: none` mode, every eligible candidate gets verdict SKIPPED and no request is made. */
  llm: LlmEndpoint | null;
  /** Calls in flight at most. CodeGrep App. A.2: 16. */
  concurrency?: number;
  /** Per-attempt limit. CodeGrep App. A.2: 60 s. */
  timeoutMs?: number;
  /** Attempts per candidate, the first included. */
  maxAttempts?: number;
  backoff?: Partial<Pick<RetryPolicy, 'baseDelayMs' | 'maxDelayMs' | 'maxRetryAfterMs'>>;
  maxConsecutiveErrors?: number;
  /** Sampling temperature, default 0 (repeatable verdicts); null leaves it to the server. */
  temperature?: number | null;
  /** Completion budget per call; unset leaves it to the server (reasoning judges need room to think). */
  maxTokens?: number;
  promptLimits?: Partial<JudgePromptLimits>;
  onJudgement(judgement: Judgement): Promise<void> | void;
  onProgress?(counts: Readonly<JudgeRunCounts>): void;
  signal?: AbortSignal;
}

export interface JudgeRunSummary {
  counts: JudgeRunCounts;
  /** Up to 10 messages naming invalid input candidates. */
  invalidExamples: string[];
  model: string | null;
  wallMs: number;
}

/** The endpoint failed `consecutive` calls in a row (each after all its retries): it is down, not the items. */
export class JudgeEndpointFailingError extends LlmError {
  constructor(
    endpoint: string,
    readonly consecutive: number,
    lastError: string,
  ) {
    super(
      'LlmUnavailable',
      `judge endpoint ${endpoint} failed ${consecutive} candidates in a row after all retries; stopping so the run can ` +
        `resume later instead of defaulting every file to RELEVANT. Last error: ${lastError}`,
      endpoint,
    );
  }
}

export const DEFAULT_MAX_CONSECUTIVE_ERRORS = 2 * DEFAULT_LLM_CONCURRENCY;

function emptyCounts(): JudgeRunCounts {
  return {
    candidates: 0,
    resumed: 0,
    duplicates: 0,
    invalid: 0,
    relevant: 0,
    notRelevant: 0,
    defaulted: 0,
    errors: 0,
    skipped: 0,
    requests: 0,
    inFlight: 0,
  };
}

export async function judgeCandidates(options: JudgeRunOptions): Promise<JudgeRunSummary> {
  const started = performance.now();
  const counts = emptyCounts();
  const invalidExamples: string[] = [];
  const maxConsecutiveErrors = options.maxConsecutiveErrors ?? DEFAULT_MAX_CONSECUTIVE_ERRORS;
  const client = options.llm ? createLlmClient(options.llm) : null;
  const model = client?.endpoint.model ?? null;

  const progress = () => options.onProgress?.({ ...counts, inFlight: executor.inFlight });
  const executor = createOrderedExecutor<Judgement>({
    concurrency: options.concurrency ?? DEFAULT_LLM_CONCURRENCY,
    signal: options.signal,
    async deliver(judgement) {
      await options.onJudgement(judgement);
      tally(counts, judgement);
      try {
        progress();
      } catch (error) {
        executor.stop(error);
      }
    },
  });

  // Failures after every retry, in a row with no success between them: the endpoint is down, not the items.
  let consecutiveErrors = 0;
  const call: JudgeCall | null = client && {
    client,
    policy: resolveRetryPolicy({
      ...options.backoff,
      maxAttempts: options.maxAttempts ?? DEFAULT_RETRY_POLICY.maxAttempts,
      timeoutMs: options.timeoutMs ?? DEFAULT_RETRY_POLICY.timeoutMs,
    }),
    promptLimits: { ...DEFAULT_JUDGE_PROMPT_LIMITS, ...options.promptLimits },
    temperature: options.temperature,
    maxTokens: options.maxTokens,
    onRequests: (count) => (counts.requests += count),
  };
  const judgeCounted = async (call: JudgeCall, candidate: JudgeCandidate, signal: AbortSignal): Promise<Judgement> => {
    const judgement = await judgeOne(candidate, call, signal);
    if (typeof judgement.error !== 'string') {
      consecutiveErrors = 0;
    } else if (++consecutiveErrors >= maxConsecutiveErrors) {
      executor.stop(new JudgeEndpointFailingError(call.client.endpoint.baseUrl, consecutiveErrors, judgement.error));
    }
    return judgement;
  };

  const admit = createCandidateGate(options.alreadyJudged);
  await executor.run(options.candidates, (raw): ExecutorStep<Judgement> => {
    counts.candidates += 1;
    const admission = admit(raw, counts.candidates);
    if (admission.kind !== 'new') {
      if (admission.kind === 'invalid') {
        counts.invalid += 1;
        if (invalidExamples.length < 10) invalidExamples.push(admission.message);
      } else if (admission.kind === 'resumed') counts.resumed += 1;
      else counts.duplicates += 1;
      progress();
      return { kind: 'skip' };
    }
    const { candidate } = admission;
    if (!call) return { kind: 'deliver', result: skippedJudgement(candidate) };
    return { kind: 'run', task: (signal) => judgeCounted(call, candidate, signal) };
  });
  progress();
  executor.throwIfStopped();
  return { counts: { ...counts }, invalidExamples, model, wallMs: performance.now() - started };
}

/** `judge: none`: the candidate is kept unjudged, without a request. */
function skippedJudgement(candidate: JudgeCandidate): Judgement {
  return {
    trajectoryId: candidate.trajectoryId,
    instanceId: candidate.instanceId,
    path: candidate.path,
    verdict: 'SKIPPED',
    reply: '',
    attempts: 0,
    model: null,
    latencyMs: 0,
  };
}

function tally(counts: JudgeRunCounts, judgement: Judgement): void {
  switch (judgement.verdict) {
    case 'RELEVANT':
      counts.relevant += 1;
      break;
    case 'NOT_RELEVANT':
      counts.notRelevant += 1;
      break;
    case 'SKIPPED':
      counts.skipped += 1;
      break;
    case 'DEFAULTED':
      if (judgement.error) counts.errors += 1;
      else counts.defaulted += 1;
      break;
  }
}

import { z } from 'zod';
import { JUDGE_REPLY_MAX_CHARS, JudgeCandidateSchema, type JudgeCandidate, type Judgement } from '../../schemas/judge';
import { followAbort } from '../llm/abort';
import { createChatCompletion } from '../llm/chat';
import { createLlmClient } from '../llm/client';
import { createLimiter, DEFAULT_LLM_CONCURRENCY } from '../llm/concurrency';
import type { LlmEndpoint } from '../llm/endpoint';
import { LlmError, LlmRequestRejectedError, LlmRetriesExhaustedError } from '../llm/errors';
import { DEFAULT_RETRY_POLICY, resolveRetryPolicy, type RetryPolicy } from '../llm/retry';
import { buildJudgeMessages, DEFAULT_JUDGE_PROMPT_LIMITS, type JudgePromptLimits } from './judge-prompt';
import { parseJudgeVerdict } from './judge-verdict';

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
 */

/** How a caller keys judgements it already holds: one per (trajectory, file). */
export function judgementKey(trajectoryId: string, path: string): string {
  return `${trajectoryId}\u0000${path}`;
}

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
  readonly failureType = 'LlmUnavailable';
  readonly nonRetryable = false;
  constructor(
    endpoint: string,
    readonly consecutive: number,
    lastError: string,
  ) {
    super(
      `judge endpoint ${endpoint} failed ${consecutive} candidates in a row after all retries; stopping so the run can ` +
        `resume later instead of defaulting every file to RELEVANT. Last error: ${lastError}`,
      endpoint,
    );
  }
}

export const DEFAULT_MAX_CONSECUTIVE_ERRORS = 2 * DEFAULT_LLM_CONCURRENCY;

/** Cuts to JUDGE_REPLY_MAX_CHARS, ending in "…" when cut, never splitting a surrogate pair. */
export function truncateReply(text: string, maxChars: number = JUDGE_REPLY_MAX_CHARS): string {
  if (text.length <= maxChars) return text;
  let head = text.slice(0, maxChars - 1);
  if (/[\uD800-\uDBFF]$/.test(head)) head = head.slice(0, -1);
  return `${head}…`;
}

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
  const concurrency = options.concurrency ?? DEFAULT_LLM_CONCURRENCY;
  const policy = resolveRetryPolicy({
    ...options.backoff,
    maxAttempts: options.maxAttempts ?? DEFAULT_RETRY_POLICY.maxAttempts,
    timeoutMs: options.timeoutMs ?? DEFAULT_RETRY_POLICY.timeoutMs,
  });
  const promptLimits = { ...DEFAULT_JUDGE_PROMPT_LIMITS, ...options.promptLimits };
  const client = options.llm ? createLlmClient(options.llm) : null;
  const model = client?.endpoint.model ?? null;
  const limiter = createLimiter(concurrency);

  // `fatal` stops the run; `internal` cancels the calls in flight when it is set or when the caller aborts.
  const internal = new AbortController();
  const unlinkCaller = followAbort(options.signal, internal);
  const callSignal = internal.signal;
  let fatal: { error: unknown } | undefined;
  const stop = (error: unknown) => {
    if (fatal) return;
    fatal = { error };
    internal.abort(error);
  };
  const stopped = () => fatal !== undefined || options.signal?.aborted === true;

  const progress = () => options.onProgress?.({ ...counts });

  let sinkFailed = false;
  let delivery: Promise<void> = Promise.resolve();
  const deliver = (judgement: Judgement): Promise<void> => {
    delivery = delivery.then(async () => {
      if (sinkFailed) return;
      try {
        await options.onJudgement(judgement);
      } catch (error) {
        sinkFailed = true;
        stop(error);
        return;
      }
      tally(judgement);
      try {
        progress();
      } catch (error) {
        stop(error);
      }
    });
    return delivery;
  };

  function tally(judgement: Judgement): void {
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

  let consecutiveErrors = 0;

  const judgeOne = async (candidate: JudgeCandidate): Promise<Judgement> => {
    if (!client) throw new Error('judgeOne needs an LLM client');
    const callStarted = performance.now();
    let retries = 0;
    const base = { trajectoryId: candidate.trajectoryId, instanceId: candidate.instanceId, path: candidate.path, model };
    try {
      const { completion, attempts } = await createChatCompletion(
        client,
        {
          messages: buildJudgeMessages(candidate, promptLimits),
          ...(options.temperature === null ? {} : { temperature: options.temperature ?? 0 }),
          ...(options.maxTokens === undefined ? {} : { max_tokens: options.maxTokens }),
        },
        { policy, signal: callSignal, onRetry: () => (retries += 1) },
      );
      counts.requests += attempts;
      consecutiveErrors = 0;
      const content = completion.choices[0]?.message.content ?? '';
      const parsed = parseJudgeVerdict(content);
      return {
        ...base,
        verdict: parsed.verdict,
        reply: truncateReply(parsed.answer !== '' ? parsed.answer : content),
        attempts,
        latencyMs: performance.now() - callStarted,
      };
    } catch (error) {
      counts.requests += retries + 1;
      if (callSignal.aborted) throw error;
      if (!(error instanceof LlmRetriesExhaustedError || error instanceof LlmRequestRejectedError)) throw error;
      consecutiveErrors += 1;
      if (consecutiveErrors >= maxConsecutiveErrors) {
        stop(new JudgeEndpointFailingError(client.endpoint.baseUrl, consecutiveErrors, error.message));
      }
      return {
        ...base,
        verdict: 'DEFAULTED',
        reply: '',
        attempts: error instanceof LlmRetriesExhaustedError ? error.attempts : retries + 1,
        latencyMs: performance.now() - callStarted,
        error: error.message,
      };
    }
  };

  const launched = new Set<string>();
  try {
    for await (const raw of options.candidates) {
      if (stopped()) break;
      counts.candidates += 1;
      const parsed = JudgeCandidateSchema.safeParse(raw);
      if (!parsed.success) {
        counts.invalid += 1;
        if (invalidExamples.length < 10) {
          invalidExamples.push(`candidate #${counts.candidates}: ${z.prettifyError(parsed.error).replace(/\n/g, ' ')}`);
        }
        progress();
        continue;
      }
      const candidate = parsed.data;
      const key = judgementKey(candidate.trajectoryId, candidate.path);
      if (options.alreadyJudged.has(key)) {
        counts.resumed += 1;
        progress();
        continue;
      }
      if (launched.has(key)) {
        counts.duplicates += 1;
        progress();
        continue;
      }
      launched.add(key);

      if (!client) {
        await deliver({
          trajectoryId: candidate.trajectoryId,
          instanceId: candidate.instanceId,
          path: candidate.path,
          verdict: 'SKIPPED',
          reply: '',
          attempts: 0,
          model: null,
          latencyMs: 0,
        });
        continue;
      }

      const release = await limiter.acquire();
      if (stopped()) {
        release();
        break;
      }
      counts.inFlight += 1;
      void judgeOne(candidate)
        .then(deliver, stop)
        .catch(stop)
        .finally(() => {
          counts.inFlight -= 1;
          release();
        });
    }
  } catch (error) {
    stop(error);
  }
  await limiter.idle();
  await delivery;
  unlinkCaller();
  progress();

  if (options.signal?.aborted) throw options.signal.reason;
  if (fatal) throw fatal.error;
  return { counts: { ...counts }, invalidExamples, model, wallMs: performance.now() - started };
}

import { JUDGE_REPLY_MAX_CHARS, type JudgeCandidate, type Judgement } from '../../schemas/judge';
import { createChatCompletion } from '../llm/chat';
import type { LlmClient } from '../llm/client';
import { LlmRequestRejectedError, LlmRetriesExhaustedError } from '../llm/errors';
import type { RetryPolicy } from '../llm/retry';
import { buildJudgeMessages, type JudgePromptLimits } from './judge-prompt';
import { parseJudgeVerdict } from './judge-verdict';

/**
 * One judge call (CodeGrep §3.4, App. A.2): the prompt, the request with its retries, the verdict. A call that
 * still fails after every retry, or that the server rejects as a bad request, becomes DEFAULTED with `error`
 * set (the paper's conservative default keeps the file); every other error (an abort, 401/403/404) is thrown.
 */
export interface JudgeCall {
  client: LlmClient;
  policy: RetryPolicy;
  promptLimits: JudgePromptLimits;
  /** Sampling temperature, default 0 (repeatable verdicts); null leaves it to the server. */
  temperature?: number | null;
  /** Completion budget per call; unset leaves it to the server. */
  maxTokens?: number;
  /** Told the number of HTTP requests this call sent (retries included), also when it throws. */
  onRequests(count: number): void;
}

/** Cuts to JUDGE_REPLY_MAX_CHARS, ending in "…" when cut, never splitting a surrogate pair. */
export function truncateReply(text: string, maxChars: number = JUDGE_REPLY_MAX_CHARS): string {
  if (text.length <= maxChars) return text;
  let head = text.slice(0, maxChars - 1);
  if (/[\uD800-\uDBFF]$/.test(head)) head = head.slice(0, -1);
  return `${head}…`;
}

export async function judgeOne(candidate: JudgeCandidate, call: JudgeCall, signal: AbortSignal): Promise<Judgement> {
  const callStarted = performance.now();
  let retries = 0;
  const base = {
    trajectoryId: candidate.trajectoryId,
    instanceId: candidate.instanceId,
    path: candidate.path,
    model: call.client.endpoint.model,
  };
  try {
    const { completion, attempts } = await createChatCompletion(
      call.client,
      {
        messages: buildJudgeMessages(candidate, call.promptLimits),
        ...(call.temperature === null ? {} : { temperature: call.temperature ?? 0 }),
        ...(call.maxTokens === undefined ? {} : { max_tokens: call.maxTokens }),
      },
      { policy: call.policy, signal, onRetry: () => (retries += 1) },
    );
    call.onRequests(attempts);
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
    call.onRequests(retries + 1);
    if (signal.aborted) throw error;
    if (!(error instanceof LlmRetriesExhaustedError || error instanceof LlmRequestRejectedError)) throw error;
    return {
      ...base,
      verdict: 'DEFAULTED',
      reply: '',
      attempts: error instanceof LlmRetriesExhaustedError ? error.attempts : retries + 1,
      latencyMs: performance.now() - callStarted,
      error: error.message,
    };
  }
}

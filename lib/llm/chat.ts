import type { ChatCompletion, ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import type { LlmClient } from './client';
import { LlmMalformedResponseError } from './errors';
import { callWithRetries, resolveRetryPolicy, type RetryEvent, type RetryPolicy } from './retry';

export type ChatRequest = Omit<ChatCompletionCreateParamsNonStreaming, 'model'> & { model?: string };

export interface ChatCallOptions {
  policy?: Partial<RetryPolicy>;
  signal?: AbortSignal;
  random?: () => number;
  onRetry?: (event: RetryEvent) => void;
}

export interface ChatResult {
  completion: ChatCompletion;
  /** HTTP attempts made, the successful one included. */
  attempts: number;
  /** Wall time over all attempts and waits. */
  latencyMs: number;
}

/** Fails (retryably) unless the body has the shape every caller relies on: a first choice with a message. */
function assertChatCompletion(body: unknown, endpoint: string): ChatCompletion {
  if (body === null || typeof body !== 'object') {
    const preview =
      typeof body === 'string' ? `text body ${JSON.stringify(body.slice(0, 80))}` : `a ${body === null ? 'null' : typeof body} body`;
    throw new LlmMalformedResponseError(endpoint, preview);
  }
  const choices = (body as { choices?: unknown }).choices;
  if (!Array.isArray(choices) || choices.length === 0) {
    throw new LlmMalformedResponseError(endpoint, 'no choices');
  }
  const message = (choices[0] as { message?: unknown } | null)?.message;
  if (message === null || typeof message !== 'object') {
    throw new LlmMalformedResponseError(endpoint, 'first choice has no message');
  }
  return body as ChatCompletion;
}

/**
 * One chat completion under retry.ts's policy. The request's model defaults to the endpoint's. Throws the
 * typed errors of errors.ts (LlmAuthError, LlmNotFoundError, LlmRequestRejectedError, LlmRetriesExhaustedError)
 * or the signal's reason when aborted.
 */
export async function createChatCompletion(llm: LlmClient, request: ChatRequest, options: ChatCallOptions = {}): Promise<ChatResult> {
  const started = performance.now();
  const policy = resolveRetryPolicy(options.policy);
  const model = request.model ?? llm.endpoint.model;
  const endpoint = llm.endpoint.baseUrl;
  const { value, attempts } = await callWithRetries(
    async (signal) => {
      // The SDK's own timeout is a backstop a little past ours, so ours is the one that fires and is counted.
      const body: unknown = await llm.openai.chat.completions.create(
        { ...request, model, stream: false },
        { signal, timeout: policy.timeoutMs + 1_000, maxRetries: 0 },
      );
      return assertChatCompletion(body, endpoint);
    },
    {
      endpoint,
      model,
      policy,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.random ? { random: options.random } : {}),
      ...(options.onRetry ? { onRetry: options.onRetry } : {}),
    },
  );
  return { completion: value, attempts, latencyMs: performance.now() - started };
}

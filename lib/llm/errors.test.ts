import { describe, expect, it } from 'vitest';
import { LlmAuthError, LlmMalformedResponseError, LlmNotFoundError, LlmRequestRejectedError, LlmRetriesExhaustedError } from './errors';

describe('LLM errors', () => {
  it('are retryable exactly when the endpoint may come back (LlmUnavailable), and named after their class', () => {
    const errors = [
      new LlmAuthError('http://e', 401, 'no'),
      new LlmNotFoundError('http://e', 'm', 'no'),
      new LlmRequestRejectedError('http://e', 400, 'no'),
      new LlmRetriesExhaustedError('http://e', 3, 'timeout'),
      new LlmMalformedResponseError('http://e', 'no choices'),
    ];
    expect(errors.map((e) => [e.name, e.failureType, e.nonRetryable])).toEqual([
      ['LlmAuthError', 'AuthenticationFailed', true],
      ['LlmNotFoundError', 'ConfigError', true],
      ['LlmRequestRejectedError', 'InvalidInput', true],
      ['LlmRetriesExhaustedError', 'LlmUnavailable', false],
      ['LlmMalformedResponseError', 'LlmUnavailable', false],
    ]);
  });
});

import { ApplicationFailure } from '@temporalio/activity';
import { describe, expect, it } from 'vitest';
import { InputFileError } from '../../lib/artifacts';
import { LlmAuthError, LlmRetriesExhaustedError } from '../../lib/llm/errors';
import { JudgeEndpointFailingError } from '../../lib/labels/judge-run';
import { describedFailure, rethrowAsFailure, rethrowLlmFailure } from './failures';

function thrown(fn: () => never): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('failure mapping', () => {
  it('a refused API key becomes a non-retryable AuthenticationFailed failure with the message', () => {
    const error = new LlmAuthError('http://127.0.0.1:9/v1', 401, 'invalid key');
    const failure = thrown(() => rethrowLlmFailure(error));
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({ type: 'AuthenticationFailed', nonRetryable: true, message: error.message });
  });

  it('an endpoint that is down becomes a retryable LlmUnavailable failure', () => {
    const failure = thrown(() => rethrowLlmFailure(new JudgeEndpointFailingError('http://judge/v1', 32, 'HTTP 503')));
    expect(failure).toMatchObject({ type: 'LlmUnavailable', nonRetryable: false });
    expect((failure as Error).message).toContain('failed 32 candidates in a row');
  });

  it('anything that is not an LlmError is rethrown as it is', () => {
    const plain = new Error('disk full');
    expect(thrown(() => rethrowLlmFailure(plain))).toBe(plain);
    const abort = new DOMException('aborted', 'AbortError');
    expect(thrown(() => rethrowLlmFailure(abort))).toBe(abort);
  });

  it('describedFailure takes the type and retryability the error names', () => {
    const error = new LlmRetriesExhaustedError('http://judge/v1', 3, 'HTTP 500');
    expect(describedFailure(error)).toMatchObject({ type: error.failureType, nonRetryable: error.nonRetryable, message: error.message });
    expect(describedFailure({ failureType: 'ConfigError', nonRetryable: true, message: 'no model folder' })).toMatchObject({
      type: 'ConfigError',
      nonRetryable: true,
    });
  });

  it('a malformed input file becomes non-retryable InvalidInput, prefixed with what was read', () => {
    const failure = thrown(() => rethrowAsFailure(new InputFileError('/data/candidates.parquet', 'row 3: path is missing'), 'candidates'));
    expect(failure).toMatchObject({ type: 'InvalidInput', nonRetryable: true });
    expect((failure as Error).message).toMatch(/^candidates: .*row 3: path is missing/);
  });
});

/**
 * Typed failures of LLM calls. `failureType` matches temporal.config.ts `retryPolicy.nonRetryableErrorTypes`
 * where the failure cannot heal by retrying, so an activity can turn it into a non-retryable ApplicationFailure
 * without knowing the classes.
 */

export type LlmFailureType = 'AuthenticationFailed' | 'ConfigError' | 'InvalidInput' | 'LlmUnavailable';

export abstract class LlmError extends Error {
  /** Whether retrying cannot help: every failure type but `LlmUnavailable` (the endpoint may come back). */
  readonly nonRetryable: boolean;
  constructor(
    readonly failureType: LlmFailureType,
    message: string,
    readonly endpoint: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
    this.nonRetryable = failureType !== 'LlmUnavailable';
  }
}

/** HTTP 401/403: the server refused the API key. Retrying cannot help. */
export class LlmAuthError extends LlmError {
  constructor(
    endpoint: string,
    readonly status: number,
    serverMessage: string,
    options?: { cause?: unknown },
  ) {
    super(
      'AuthenticationFailed',
      `LLM endpoint ${endpoint} refused the API key (HTTP ${status}: ${serverMessage}); ` +
        'check CODEGREP_LLM_API_KEY (or the apiKey in the config) for this endpoint',
      endpoint,
      options,
    );
  }
}

/** HTTP 404: wrong base URL or a model the server does not serve. Every further request would fail alike. */
export class LlmNotFoundError extends LlmError {
  constructor(
    endpoint: string,
    readonly model: string,
    serverMessage: string,
    options?: { cause?: unknown },
  ) {
    super(
      'ConfigError',
      `LLM endpoint ${endpoint} answered 404 for model "${model}" (${serverMessage}); ` +
        'check the base URL (it usually ends in /v1) and the served model name',
      endpoint,
      options,
    );
  }
}

/** Another 4xx (400, 413, 422 …): the server rejected this request; sending it again cannot help. */
export class LlmRequestRejectedError extends LlmError {
  constructor(
    endpoint: string,
    readonly status: number,
    serverMessage: string,
    options?: { cause?: unknown },
  ) {
    super('InvalidInput', `LLM endpoint ${endpoint} rejected the request (HTTP ${status}: ${serverMessage})`, endpoint, options);
  }
}

/** A transient failure (429, 5xx, timeout, connection, malformed body) that lasted through every attempt. */
export class LlmRetriesExhaustedError extends LlmError {
  constructor(
    endpoint: string,
    readonly attempts: number,
    readonly lastFailure: string,
    options?: { cause?: unknown },
  ) {
    super('LlmUnavailable', `LLM endpoint ${endpoint} failed ${attempts} attempt(s); last failure: ${lastFailure}`, endpoint, options);
  }
}

/** The server answered 2xx but the body is not a chat completion (non-JSON, no choices …). Retryable. */
export class LlmMalformedResponseError extends LlmError {
  constructor(
    endpoint: string,
    readonly what: string,
    options?: { cause?: unknown },
  ) {
    super('LlmUnavailable', `LLM endpoint ${endpoint} sent a malformed chat completion: ${what}`, endpoint, options);
  }
}

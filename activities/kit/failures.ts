import { ApplicationFailure } from '@temporalio/activity';
import { InputFileError } from '../../lib/artifacts';
import { LlmError } from '../../lib/llm/errors';
import { PredictorFailure } from '../../lib/retrievers/predictors';

/**
 * Failure mapping for activities, in one place. Temporal retries an activity failure unless it is marked
 * non-retryable, so every "the input or the config is wrong" error must go through here: retrying it only
 * delays the message the user needs.
 */

/** The input (a file, a row, a plan entry) is wrong: retrying cannot help. */
export function invalidInput(message: string): ApplicationFailure {
  return ApplicationFailure.create({ type: 'InvalidInput', nonRetryable: true, message });
}

/** The config is wrong (a bad option, a model folder that cannot be used): retrying cannot help. */
export function configError(message: string): ApplicationFailure {
  return ApplicationFailure.create({ type: 'ConfigError', nonRetryable: true, message });
}

/** A named, non-retryable failure (`type` is what workflows and the CLI match on). */
export function nonRetryable(type: string, message: string, details?: unknown): ApplicationFailure {
  return ApplicationFailure.create({ type, nonRetryable: true, message, details: details === undefined ? undefined : [details] });
}

/**
 * Rethrows `error` as an activity failure: an `InputFileError` (a malformed input file, named with its row)
 * becomes non-retryable `InvalidInput`, prefixed with `what` when given; anything else is rethrown as it is
 * (cancellation included), so Temporal's retry policy applies.
 */
export function rethrowAsFailure(error: unknown, what?: string): never {
  if (error instanceof InputFileError) throw invalidInput(what ? `${what}: ${error.message}` : error.message);
  throw error;
}

/**
 * An error of lib/ that names its own failure type and whether retrying can help (`LlmError`, the retrievers'
 * `PredictorFailure`): it becomes the failure it says, so workflows and the CLI match on `failureType`.
 */
export interface SelfDescribingError {
  readonly failureType: string;
  readonly nonRetryable: boolean;
  readonly message: string;
}

export function describedFailure(error: SelfDescribingError): ApplicationFailure {
  return ApplicationFailure.create({ type: error.failureType, nonRetryable: error.nonRetryable, message: error.message });
}

/**
 * Rethrows `error` as an activity failure when it is an `LlmError` (a refused API key is non-retryable, an
 * endpoint that is down is retryable); anything else is rethrown as it is.
 */
export function rethrowLlmFailure(error: unknown): never {
  if (error instanceof LlmError) throw describedFailure(error);
  throw error;
}

/**
 * A retriever failure that concerns every instance it was asked about (a refused API key, a model folder that
 * cannot load, an endpoint that stays unreachable), as the activity failure its type names; else as
 * `rethrowAsFailure`.
 */
export function rethrowPredictorFailure(error: unknown): never {
  if (error instanceof PredictorFailure) throw describedFailure(error);
  return rethrowAsFailure(error);
}

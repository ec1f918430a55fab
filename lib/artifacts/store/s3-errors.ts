import { ArtifactStoreError, StoreBucketNotFoundError, StoreCredentialsError, StoreUnreachableError } from './errors';

const CREDENTIAL_CODES = new Set([
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'AccessDenied',
  'InvalidToken',
  'ExpiredToken',
  'InvalidClientTokenId',
  'CredentialsProviderError',
  'Forbidden',
]);
const UNREACHABLE_CODES =
  /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ECONNRESET|ETIMEDOUT|TimeoutError|socket hang up|connect ETIMEDOUT/;

type S3Failure = { name?: string; Code?: string; code?: string; message?: string; $metadata?: { httpStatusCode?: number } };

/** The HTTP status an SDK error carries, if the server answered. */
export function httpStatusOf(error: unknown): number | undefined {
  return (error as S3Failure).$metadata?.httpStatusCode;
}

/** The named error for a failed S3 call on `uri`. */
export function explainS3Error(error: unknown, uri: string, what: string, endpoint: string): Error {
  if (error instanceof ArtifactStoreError) return error;
  const e = error as S3Failure;
  const code = e.name ?? e.Code ?? '';
  const status = httpStatusOf(error);
  const text = `${code}${e.code ? ` ${e.code}` : ''}: ${e.message ?? String(error)}`;
  if (code === 'NoSuchBucket')
    return new StoreBucketNotFoundError(
      uri,
      `artifact store ${uri}: the bucket does not exist at ${endpoint} (${what}). Create it, or fix the bucket in the URI.`,
      { cause: error },
    );
  if (CREDENTIAL_CODES.has(code) || status === 403 || status === 401) {
    return new StoreCredentialsError(
      uri,
      `artifact store ${uri}: ${endpoint} refused the credentials (${what}; ${text}). Check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or AWS_PROFILE.`,
      { cause: error },
    );
  }
  if (UNREACHABLE_CODES.test(text) || UNREACHABLE_CODES.test(String((error as { cause?: unknown }).cause ?? ''))) {
    return new StoreUnreachableError(
      uri,
      `artifact store ${uri}: nothing answers at ${endpoint} (${what}; ${text}). Check AWS_ENDPOINT_URL_S3 and that the store is up.`,
      { cause: error },
    );
  }
  return new ArtifactStoreError(uri, `artifact store ${uri}: ${what} failed: ${text}`, { cause: error });
}

/** Whether an SDK error says the object is not there (and not that the bucket is missing). */
export function isNotFound(error: unknown): boolean {
  const e = error as S3Failure;
  return e.name === 'NoSuchKey' || e.name === 'NotFound' || (httpStatusOf(error) === 404 && e.name !== 'NoSuchBucket');
}

/** A `PutObject If-None-Match: *` refused because the key exists (HTTP 412). */
export function isPreconditionFailed(error: unknown): boolean {
  return httpStatusOf(error) === 412 || (error as S3Failure).name === 'PreconditionFailed';
}

/** A conditional write refused while another one on the same key is in flight (HTTP 409): worth retrying. */
export function isConditionalConflict(error: unknown): boolean {
  return httpStatusOf(error) === 409 || (error as S3Failure).name === 'ConditionalRequestConflict';
}

/**
 * What can go wrong talking to an artifact store, each as its own named error so an activity can tell a
 * misconfiguration (non-retryable: a bucket that does not exist, credentials the store refuses) from an
 * outage (retryable: the store is down).
 */
export class ArtifactStoreError extends Error {
  constructor(
    /** The store or object URI the operation was on. */
    readonly uri: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** An `s3://` URI or store setting that cannot work (bad URI, no region). */
export class StoreConfigError extends ArtifactStoreError {}

/** The bucket of an `s3://` URI does not exist (S3 `NoSuchBucket`). */
export class StoreBucketNotFoundError extends ArtifactStoreError {}

/** The store refused the credentials (unknown access key, wrong secret, access denied). */
export class StoreCredentialsError extends ArtifactStoreError {}

/** Nothing answers at the store's endpoint (refused, unresolvable, timed out). Retrying may help. */
export class StoreUnreachableError extends ArtifactStoreError {}

/** The object a URI names is not in the store. */
export class StoreObjectNotFoundError extends ArtifactStoreError {}

/** Bytes read from the store do not hash to the sha256 recorded when they were written. */
export class StoreIntegrityError extends ArtifactStoreError {}

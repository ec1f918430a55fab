import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { Readable, Transform } from 'node:stream';
import {
  CopyObjectCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { writeFileAtomically } from '../atomic-write';
import { sha256File } from '../sha256-file';
import {
  ArtifactStoreError,
  StoreBucketNotFoundError,
  StoreCredentialsError,
  StoreIntegrityError,
  StoreObjectNotFoundError,
  StoreUnreachableError,
} from './errors';
import { checkKey, type ArtifactStore, type StoredObject, type WriteResult } from './store';

/**
 * Connection settings of an `s3://` store. Unset fields come from the standard AWS configuration, so the
 * same code runs against AWS S3 and any S3-compatible server:
 *   endpoint        AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL (unset: AWS S3 itself)
 *   region          AWS_REGION / AWS_DEFAULT_REGION / the profile's region (us-east-1 for a custom endpoint)
 *   forcePathStyle  AWS_S3_FORCE_PATH_STYLE=true (most S3-compatible servers want path-style URLs)
 *   credentials     AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, or AWS_PROFILE from
 *                   ~/.aws/credentials, or instance/container roles: the SDK's default chain
 */
export interface S3StoreSettings {
  endpoint?: string;
  region?: string;
  forcePathStyle?: boolean;
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Attempts per request (AWS_MAX_ATTEMPTS; the SDK default is 3). */
  maxAttempts?: number;
  /** Multipart part size for uploads; memory per upload is about partSize × queueSize. */
  partSizeBytes?: number;
}

/** S3 CopyObject copies at most 5 GiB in one request. */
const SINGLE_COPY_LIMIT = 5 * 1024 ** 3;
const DEFAULT_PART_SIZE = 8 * 1024 ** 2;
const UPLOAD_QUEUE = 2;
const SHA_METADATA = 'sha256';

export function s3SettingsFromEnv(env: NodeJS.ProcessEnv = process.env): S3StoreSettings {
  const endpoint = env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL || undefined;
  const region = env.AWS_REGION || env.AWS_DEFAULT_REGION || (endpoint ? 'us-east-1' : undefined);
  const pathStyle = env.AWS_S3_FORCE_PATH_STYLE;
  const attempts = env.AWS_MAX_ATTEMPTS ? Number(env.AWS_MAX_ATTEMPTS) : undefined;
  return {
    ...(endpoint ? { endpoint } : {}),
    ...(region ? { region } : {}),
    ...(pathStyle !== undefined ? { forcePathStyle: /^(1|true|yes)$/i.test(pathStyle) } : {}),
    ...(attempts !== undefined && Number.isInteger(attempts) && attempts > 0 ? { maxAttempts: attempts } : {}),
  };
}

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

/** The named error for a failed S3 call on `uri`. */
export function explainS3Error(error: unknown, uri: string, what: string, endpoint: string): Error {
  if (error instanceof ArtifactStoreError) return error;
  const e = error as { name?: string; Code?: string; code?: string; message?: string; $metadata?: { httpStatusCode?: number } };
  const code = e.name ?? e.Code ?? '';
  const status = e.$metadata?.httpStatusCode;
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

function isNotFound(error: unknown): boolean {
  const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e.name === 'NoSuchKey' || e.name === 'NotFound' || (e.$metadata?.httpStatusCode === 404 && e.name !== 'NoSuchBucket');
}

/** `s3://bucket/prefix` through the AWS SDK v3. */
export function openS3Store(bucket: string, prefix: string, settings: S3StoreSettings = s3SettingsFromEnv()): ArtifactStore {
  const config: S3ClientConfig = {
    ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
    ...(settings.region ? { region: settings.region } : {}),
    ...(settings.forcePathStyle !== undefined ? { forcePathStyle: settings.forcePathStyle } : {}),
    ...(settings.credentials ? { credentials: settings.credentials } : {}),
    ...(settings.maxAttempts ? { maxAttempts: settings.maxAttempts } : {}),
  };
  const client = new S3Client(config);
  const root = `s3://${bucket}${prefix ? `/${prefix}` : ''}`;
  const endpoint = settings.endpoint ?? `AWS S3 (${settings.region ?? 'default region'})`;
  const objectKey = (key: string) => (prefix ? `${prefix}/${checkKey(root, key)}` : checkKey(root, key));
  const uriOf = (key: string) => `${root}/${checkKey(root, key)}`;
  const partSize = settings.partSizeBytes ?? DEFAULT_PART_SIZE;
  let readyOnce: Promise<void> | null = null;
  let conditionalOnce: Promise<'atomic' | 'check-then-write'> | null = null;

  async function call<T>(what: string, key: string | null, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw explainS3Error(error, key === null ? root : uriOf(key), what, endpoint);
    }
  }

  const ready = () => {
    readyOnce ??= call('HeadBucket', null, async () => {
      try {
        await client.send(new HeadBucketCommand({ Bucket: bucket }));
      } catch (error) {
        // HeadBucket has no body: a 404 is the bucket missing.
        if ((error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) {
          throw Object.assign(new Error(`bucket ${bucket} not found`), { name: 'NoSuchBucket' });
        }
        throw error;
      }
    }).catch((error: unknown) => {
      readyOnce = null; // a store that was down may come back
      throw error;
    });
    return readyOnce;
  };

  /** Streams `body` to `Key` with a multipart upload (bounded memory); `metadata` is sent with it. */
  async function upload(key: string, objectName: string, body: Readable | Uint8Array, metadata: Record<string, string>): Promise<void> {
    await call('upload', key, () =>
      new Upload({
        client,
        params: { Bucket: bucket, Key: objectName, Body: body, Metadata: metadata },
        partSize,
        queueSize: UPLOAD_QUEUE,
        leavePartsOnError: false,
      }).done(),
    );
  }

  /**
   * Atomic commit: upload to a temporary key, then copy it to the final key with the sha256 as metadata and
   * remove the temporary one; a reader of the final key sees the old object or the whole new one. Above 5 GiB
   * (S3's single-copy limit) the file is hashed first and uploaded straight to its key, which is atomic too:
   * a multipart object appears only when its upload completes.
   */
  async function commitStream(
    key: string,
    open: () => Readable | Uint8Array,
    knownBytes: number,
    hashFirst: () => Promise<string>,
  ): Promise<WriteResult> {
    await ready();
    const finalName = objectKey(key);
    if (knownBytes > SINGLE_COPY_LIMIT) {
      const sha256 = await hashFirst();
      await upload(key, finalName, open(), { [SHA_METADATA]: sha256 });
      return { sha256, bytes: knownBytes };
    }
    const hash = createHash('sha256');
    let bytes = 0;
    const source = open();
    let counted: Readable | Uint8Array;
    if (source instanceof Readable) {
      // Hash the bytes on their way to the upload (one pass, bounded memory).
      const hashing = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          hash.update(chunk);
          bytes += chunk.length;
          done(null, chunk);
        },
      });
      source.on('error', (error) => hashing.destroy(error));
      counted = source.pipe(hashing);
    } else {
      hash.update(source);
      bytes = source.byteLength;
      counted = source;
    }
    const tmpName = `${finalName}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
    try {
      await upload(key, tmpName, counted, {});
      const sha256 = hash.digest('hex');
      await call('CopyObject', key, () =>
        client.send(
          new CopyObjectCommand({
            Bucket: bucket,
            Key: finalName,
            CopySource: `${bucket}/${tmpName.split('/').map(encodeURIComponent).join('/')}`,
            MetadataDirective: 'REPLACE',
            Metadata: { [SHA_METADATA]: sha256 },
          }),
        ),
      );
      return { sha256, bytes };
    } finally {
      await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: tmpName })).catch(() => undefined);
    }
  }

  const store: ArtifactStore = {
    root,
    uriOf,
    keyOf(uri) {
      if (!uri.startsWith(`${root}/`)) return null;
      return uri.slice(root.length + 1);
    },
    ready,
    async putFile(key, localPath) {
      const { size } = await stat(localPath);
      return commitStream(
        key,
        () => createReadStream(localPath),
        size,
        () => sha256File(localPath),
      );
    },
    async putBytes(key, content) {
      const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
      if (bytes.byteLength <= partSize) {
        // Small objects (manifests): one PUT is atomic by itself and carries its sha256.
        await ready();
        const sha256 = createHash('sha256').update(bytes).digest('hex');
        await call('PutObject', key, () =>
          client.send(new PutObjectCommand({ Bucket: bucket, Key: objectKey(key), Body: bytes, Metadata: { [SHA_METADATA]: sha256 } })),
        );
        return { sha256, bytes: bytes.byteLength };
      }
      return commitStream(
        key,
        () => bytes,
        bytes.byteLength,
        async () => createHash('sha256').update(bytes).digest('hex'),
      );
    },
    async getFile(key, localPath) {
      await ready();
      const response = await call('GetObject', key, async () => {
        try {
          return await client.send(new GetObjectCommand({ Bucket: bucket, Key: objectKey(key) }));
        } catch (error) {
          if (isNotFound(error)) throw new StoreObjectNotFoundError(uriOf(key), `artifact store: ${uriOf(key)} does not exist`);
          throw error;
        }
      });
      const recorded = response.Metadata?.[SHA_METADATA] ?? null;
      const result = await call('download', key, () =>
        writeFileAtomically(localPath, async (write) => {
          for await (const chunk of response.Body as Readable) await write(chunk as Buffer);
        }),
      );
      if (recorded !== null && recorded !== result.sha256) {
        throw new StoreIntegrityError(
          uriOf(key),
          `artifact store: ${uriOf(key)} downloaded with sha256 ${result.sha256}, but it was written with ${recorded}`,
        );
      }
      return result;
    },
    async getBytes(key) {
      await ready();
      return call('GetObject', key, async () => {
        try {
          const response = await client.send(new GetObjectCommand({ Bucket: bucket, Key: objectKey(key) }));
          return Buffer.from(await response.Body!.transformToByteArray());
        } catch (error) {
          if (isNotFound(error)) return null;
          throw error;
        }
      });
    },
    async head(key): Promise<StoredObject | null> {
      await ready();
      return call('HeadObject', key, async () => {
        try {
          const response = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: objectKey(key) }));
          return { key, bytes: response.ContentLength ?? 0, sha256: response.Metadata?.[SHA_METADATA] ?? null };
        } catch (error) {
          if (isNotFound(error)) return null;
          throw error;
        }
      });
    },
    async list(keyPrefix) {
      await ready();
      const out: StoredObject[] = [];
      const base = prefix ? `${prefix}/` : '';
      let token: string | undefined;
      do {
        const page = await call('ListObjectsV2', null, () =>
          client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${base}${keyPrefix}`, ContinuationToken: token })),
        );
        for (const object of page.Contents ?? []) {
          const key = object.Key!.slice(base.length);
          if (/\.tmp-\d+-[0-9a-f]+$/.test(key)) continue; // an upload in flight, not an object yet
          out.push({ key, bytes: object.Size ?? 0, sha256: null });
        }
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
      return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    },
    async delete(key) {
      await ready();
      await call('DeleteObject', key, () => client.send(new DeleteObjectCommand({ Bucket: bucket, Key: objectKey(key) })));
    },
    async putBytesIfAbsent(key, content) {
      const mode = await conditionalWrites();
      const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
      if (mode === 'check-then-write') {
        // The server ignores If-None-Match: the best it allows is a HEAD then a PUT (README "Deployment").
        if (await store.head(key)) return false;
        await store.putBytes(key, bytes);
        return true;
      }
      return putIfNoneMatch(key, bytes);
    },
    conditionalWrites,
  };
  return store;

  /** One PutObject with `If-None-Match: *`: false on 412 (the key exists); a 409 (a concurrent conditional write in flight) is retried. */
  async function putIfNoneMatch(key: string, bytes: Uint8Array): Promise<boolean> {
    await ready();
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    for (let attempt = 1; ; attempt++) {
      try {
        await client.send(
          new PutObjectCommand({
            Bucket: bucket,
            Key: objectKey(key),
            Body: bytes,
            IfNoneMatch: '*',
            Metadata: { [SHA_METADATA]: sha256 },
          }),
        );
        return true;
      } catch (error) {
        const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
        if (status === 412 || (error as { name?: string }).name === 'PreconditionFailed') return false;
        if ((status === 409 || (error as { name?: string }).name === 'ConditionalRequestConflict') && attempt < 5) {
          await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
          continue;
        }
        throw explainS3Error(error, uriOf(key), 'PutObject If-None-Match', endpoint);
      }
    }
  }

  /**
   * Whether the server enforces `If-None-Match: *` (AWS S3 since 2024; other S3-compatible servers vary):
   * found once by creating a probe object twice; a server that accepts the second create ignores the header.
   */
  function conditionalWrites(): Promise<'atomic' | 'check-then-write'> {
    conditionalOnce ??= (async () => {
      const probe = `.codegrep-conditional-probe-${process.pid}-${randomBytes(6).toString('hex')}`;
      try {
        if (!(await putIfNoneMatch(probe, Buffer.from('1')))) return 'check-then-write' as const;
        return (await putIfNoneMatch(probe, Buffer.from('2'))) ? ('check-then-write' as const) : ('atomic' as const);
      } finally {
        await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: objectKey(probe) })).catch(() => undefined);
      }
    })().catch((error: unknown) => {
      conditionalOnce = null; // a store that was down may come back
      throw error;
    });
    return conditionalOnce;
  }
}

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
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { contentBytes, isTemporaryName, temporaryName, writeFileAtomically } from '../atomic-write';
import { sha256File } from '../sha256-file';
import { StoreIntegrityError, StoreObjectNotFoundError } from './errors';
import { explainS3Error, httpStatusOf, isConditionalConflict, isNotFound, isPreconditionFailed } from './s3-errors';
import { describeEndpoint, s3ClientConfig, type S3StoreSettings } from './s3-settings';
import { checkKey, sortByKey, type ArtifactStore, type StoredObject, type WriteResult } from './store';

/** S3 CopyObject copies at most 5 GiB in one request. */
const SINGLE_COPY_LIMIT = 5 * 1024 ** 3;
const DEFAULT_PART_SIZE = 8 * 1024 ** 2;
const UPLOAD_QUEUE = 2;
const SHA_METADATA = 'sha256';

type ConditionalWrites = 'atomic' | 'check-then-write';

/** `s3://bucket/prefix` through the AWS SDK v3. */
export function openS3Store(bucket: string, prefix: string, settings: S3StoreSettings): ArtifactStore {
  const s3 = new S3Bucket(bucket, prefix, settings);
  return {
    root: s3.root,
    uriOf: (key) => s3.uriOf(key),
    keyOf: (uri) => s3.keyOf(uri),
    ready: () => s3.ready(),
    putFile: (key, localPath) => s3.putFile(key, localPath),
    putBytes: (key, content) => s3.putBytes(key, content),
    getFile: (key, localPath) => s3.getFile(key, localPath),
    getBytes: (key) => s3.getBytes(key),
    head: (key) => s3.head(key),
    list: (keyPrefix) => s3.list(keyPrefix),
    delete: (key) => s3.delete(key),
    putBytesIfAbsent: (key, content) => s3.putBytesIfAbsent(key, content),
    conditionalWrites: () => s3.conditionalWrites(),
  };
}

/** A promise made on the first call and shared by the later ones; forgotten when it fails, so a store that was down may come back. */
function onceUntilFailure<T>(make: () => Promise<T>): () => Promise<T> {
  let once: Promise<T> | null = null;
  return () => {
    once ??= make().catch((error: unknown) => {
      once = null;
      throw error;
    });
    return once;
  };
}

/** What `request` answers, or null when the object it asks for is not there. */
async function nullIfNotFound<T>(request: () => Promise<T>): Promise<T | null> {
  try {
    return await request();
  } catch (error) {
    if (isNotFound(error)) return null;
    throw error;
  }
}

/**
 * Passes `source` on while hashing and counting its bytes, so an upload hashes in the same pass (bounded
 * memory); `result()` is complete once the body has been consumed.
 */
function hashWhileUploading(source: Readable | Uint8Array): { body: Readable | Uint8Array; result(): WriteResult } {
  const hash = createHash('sha256');
  let bytes = 0;
  const result = () => ({ sha256: hash.digest('hex'), bytes });
  if (!(source instanceof Readable)) {
    hash.update(source);
    bytes = source.byteLength;
    return { body: source, result };
  }
  const hashing = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      bytes += chunk.length;
      done(null, chunk);
    },
  });
  source.on('error', (error) => hashing.destroy(error));
  return { body: source.pipe(hashing), result };
}

/** One bucket and prefix of an S3 server: the store's operations, each made of SDK requests whose failures get named errors. */
class S3Bucket {
  readonly root: string;
  private readonly client: S3Client;
  private readonly endpoint: string;
  private readonly partSize: number;
  /** Checks once that the server answers and the bucket exists. */
  readonly ready = onceUntilFailure(() => this.headBucket());
  /**
   * Whether the server enforces `If-None-Match: *` (AWS S3 since 2024; other S3-compatible servers vary),
   * found once.
   */
  readonly conditionalWrites = onceUntilFailure(() => this.probeConditionalWrites());

  constructor(
    private readonly bucket: string,
    private readonly prefix: string,
    settings: S3StoreSettings,
  ) {
    this.client = new S3Client(s3ClientConfig(settings));
    this.root = `s3://${bucket}${prefix ? `/${prefix}` : ''}`;
    this.endpoint = describeEndpoint(settings);
    this.partSize = settings.partSizeBytes ?? DEFAULT_PART_SIZE;
  }

  uriOf(key: string): string {
    return `${this.root}/${checkKey(this.root, key)}`;
  }

  keyOf(uri: string): string | null {
    if (!uri.startsWith(`${this.root}/`)) return null;
    return uri.slice(this.root.length + 1);
  }

  /** The bucket's object name of a store key. */
  private objectKey(key: string): string {
    return this.prefix ? `${this.prefix}/${checkKey(this.root, key)}` : checkKey(this.root, key);
  }

  /** Runs one request on `key` (null: the store itself), turning its failure into the named store error. */
  private async call<T>(what: string, key: string | null, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw explainS3Error(error, key === null ? this.root : this.uriOf(key), what, this.endpoint);
    }
  }

  private headBucket(): Promise<void> {
    return this.call('HeadBucket', null, async () => {
      try {
        await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
      } catch (error) {
        // HeadBucket has no body: a 404 is the bucket missing.
        if (httpStatusOf(error) === 404) {
          throw Object.assign(new Error(`bucket ${this.bucket} not found`), { name: 'NoSuchBucket' });
        }
        throw error;
      }
    });
  }

  async putFile(key: string, localPath: string): Promise<WriteResult> {
    const { size } = await stat(localPath);
    return this.commitStream(
      key,
      () => createReadStream(localPath),
      size,
      () => sha256File(localPath),
    );
  }

  async putBytes(key: string, content: Uint8Array | string): Promise<WriteResult> {
    const bytes = contentBytes(content);
    if (bytes.byteLength <= this.partSize) {
      // Small objects (manifests): one PUT is atomic by itself and carries its sha256.
      await this.ready();
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      await this.call('PutObject', key, () =>
        this.client.send(
          new PutObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key), Body: bytes, Metadata: { [SHA_METADATA]: sha256 } }),
        ),
      );
      return { sha256, bytes: bytes.byteLength };
    }
    return this.commitStream(
      key,
      () => bytes,
      bytes.byteLength,
      async () => createHash('sha256').update(bytes).digest('hex'),
    );
  }

  /**
   * Atomic commit: upload to a temporary key, then copy it to the final key with the sha256 as metadata and
   * remove the temporary one; a reader of the final key sees the old object or the whole new one. Above 5 GiB
   * (S3's single-copy limit) the file is hashed first and uploaded straight to its key, which is atomic too:
   * a multipart object appears only when its upload completes.
   */
  private async commitStream(
    key: string,
    open: () => Readable | Uint8Array,
    knownBytes: number,
    hashFirst: () => Promise<string>,
  ): Promise<WriteResult> {
    await this.ready();
    const finalName = this.objectKey(key);
    if (knownBytes > SINGLE_COPY_LIMIT) {
      const sha256 = await hashFirst();
      await this.upload(key, finalName, open(), { [SHA_METADATA]: sha256 });
      return { sha256, bytes: knownBytes };
    }
    const counted = hashWhileUploading(open());
    const tmpName = temporaryName(finalName);
    try {
      await this.upload(key, tmpName, counted.body, {});
      const written = counted.result();
      await this.copyWithSha256(key, tmpName, finalName, written.sha256);
      return written;
    } finally {
      await this.deleteQuietly(tmpName);
    }
  }

  /** Streams `body` to `objectName` with a multipart upload (bounded memory); `metadata` is sent with it. */
  private async upload(key: string, objectName: string, body: Readable | Uint8Array, metadata: Record<string, string>): Promise<void> {
    await this.call('upload', key, () =>
      new Upload({
        client: this.client,
        params: { Bucket: this.bucket, Key: objectName, Body: body, Metadata: metadata },
        partSize: this.partSize,
        queueSize: UPLOAD_QUEUE,
        leavePartsOnError: false,
      }).done(),
    );
  }

  /** Copies `fromName` over `toName` (one request, so atomic), recording `sha256` as the copy's metadata. */
  private async copyWithSha256(key: string, fromName: string, toName: string, sha256: string): Promise<void> {
    await this.call('CopyObject', key, () =>
      this.client.send(
        new CopyObjectCommand({
          Bucket: this.bucket,
          Key: toName,
          CopySource: `${this.bucket}/${fromName.split('/').map(encodeURIComponent).join('/')}`,
          MetadataDirective: 'REPLACE',
          Metadata: { [SHA_METADATA]: sha256 },
        }),
      ),
    );
  }

  /** Deletes an object of our own making (a temporary upload, a probe); a failure leaves only litter. */
  private async deleteQuietly(objectName: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: objectName })).catch(() => undefined);
  }

  async getFile(key: string, localPath: string): Promise<WriteResult> {
    await this.ready();
    const response = await this.call('GetObject', key, () =>
      nullIfNotFound(() => this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }))),
    );
    if (response === null) throw new StoreObjectNotFoundError(this.uriOf(key), `artifact store: ${this.uriOf(key)} does not exist`);
    const recorded = response.Metadata?.[SHA_METADATA] ?? null;
    const result = await this.call('download', key, () =>
      writeFileAtomically(localPath, async (write) => {
        for await (const chunk of response.Body as Readable) await write(chunk as Buffer);
      }),
    );
    if (recorded !== null && recorded !== result.sha256) {
      throw new StoreIntegrityError(
        this.uriOf(key),
        `artifact store: ${this.uriOf(key)} downloaded with sha256 ${result.sha256}, but it was written with ${recorded}`,
      );
    }
    return result;
  }

  async getBytes(key: string): Promise<Buffer | null> {
    await this.ready();
    return this.call('GetObject', key, () =>
      nullIfNotFound(async () => {
        const response = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }));
        return Buffer.from(await response.Body!.transformToByteArray());
      }),
    );
  }

  async head(key: string): Promise<StoredObject | null> {
    await this.ready();
    return this.call('HeadObject', key, () =>
      nullIfNotFound(async () => {
        const response = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }));
        return { key, bytes: response.ContentLength ?? 0, sha256: response.Metadata?.[SHA_METADATA] ?? null };
      }),
    );
  }

  /** Every page of ListObjectsV2 below `keyPrefix`, without the uploads in flight. */
  async list(keyPrefix: string): Promise<StoredObject[]> {
    await this.ready();
    const out: StoredObject[] = [];
    const base = this.prefix ? `${this.prefix}/` : '';
    let token: string | undefined;
    do {
      const page = await this.call('ListObjectsV2', null, () =>
        this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: `${base}${keyPrefix}`, ContinuationToken: token })),
      );
      for (const object of page.Contents ?? []) {
        const key = object.Key!.slice(base.length);
        if (isTemporaryName(key)) continue; // an upload in flight, not an object yet
        out.push({ key, bytes: object.Size ?? 0, sha256: null });
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return sortByKey(out);
  }

  async delete(key: string): Promise<void> {
    await this.ready();
    await this.call('DeleteObject', key, () =>
      this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) })),
    );
  }

  async putBytesIfAbsent(key: string, content: Uint8Array | string): Promise<boolean> {
    const mode = await this.conditionalWrites();
    const bytes = contentBytes(content);
    if (mode === 'check-then-write') {
      // The server ignores If-None-Match: the best it allows is a HEAD then a PUT (README "Deployment").
      if (await this.head(key)) return false;
      await this.putBytes(key, bytes);
      return true;
    }
    return this.putIfNoneMatch(key, bytes);
  }

  /** One PutObject with `If-None-Match: *`: false on 412 (the key exists); a 409 (a concurrent conditional write in flight) is retried. */
  private async putIfNoneMatch(key: string, bytes: Uint8Array): Promise<boolean> {
    await this.ready();
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    for (let attempt = 1; ; attempt++) {
      try {
        await this.client.send(
          new PutObjectCommand({
            Bucket: this.bucket,
            Key: this.objectKey(key),
            Body: bytes,
            IfNoneMatch: '*',
            Metadata: { [SHA_METADATA]: sha256 },
          }),
        );
        return true;
      } catch (error) {
        if (isPreconditionFailed(error)) return false;
        if (isConditionalConflict(error) && attempt < 5) {
          await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
          continue;
        }
        throw explainS3Error(error, this.uriOf(key), 'PutObject If-None-Match', this.endpoint);
      }
    }
  }

  /** Creates a probe object twice: a server that accepts the second create ignores the header. */
  private async probeConditionalWrites(): Promise<ConditionalWrites> {
    const probe = `.codegrep-conditional-probe-${process.pid}-${randomBytes(6).toString('hex')}`;
    try {
      if (!(await this.putIfNoneMatch(probe, Buffer.from('1')))) return 'check-then-write';
      return (await this.putIfNoneMatch(probe, Buffer.from('2'))) ? 'check-then-write' : 'atomic';
    } finally {
      await this.deleteQuietly(this.objectKey(probe));
    }
  }
}

import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import * as arrow from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashConfig, readManifest, readParquetObjects, readRows, sha256File, writeParquetArtifact } from '../../lib/artifacts';
import {
  ArtifactStoreError,
  checkStoredArtifact,
  localCopy,
  localPathForRef,
  openArtifactStore,
  openStoreAppendLog,
  parseStoreUri,
  publishArtifact,
  readStoreAppendLog,
  StoreBucketNotFoundError,
  StoreConfigError,
  StoreCredentialsError,
  StoreUnreachableError,
  type ArtifactStore,
  type S3StoreSettings,
} from '../../lib/artifacts/store';
import { startSeaweedS3, type SeaweedS3 } from '../support/seaweedfs';

/**
 * The artifact store (lib/artifacts/store) against a real S3-compatible server: SeaweedFS built from source by
 * scripts/ensure-seaweedfs.sh, started here on free ports. The same operations run on a `file://` store, so
 * both schemes behave alike.
 */
const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-store-it-'));
let weed: SeaweedS3;
let s3: S3StoreSettings;
const BUCKET = 'codegrep-artifacts';

beforeAll(async () => {
  weed = await startSeaweedS3(path.join(work, 'weed'));
  await weed.createBucket(BUCKET);
  s3 = {
    endpoint: weed.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: weed.accessKeyId, secretAccessKey: weed.secretAccessKey },
    maxAttempts: 2,
  };
  // localPathForRef opens s3:// URIs with the standard AWS environment variables, as a worker does.
  Object.assign(process.env, weed.env, { CODEGREP_ARTIFACT_CACHE: path.join(work, 'default-node-cache') });
}, 180_000);

afterAll(async () => {
  await weed?.stop();
  rmSync(work, { recursive: true, force: true });
});

const sha = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

describe('store URIs', () => {
  it('parses s3://, file:// and plain paths, and refuses the rest by name', () => {
    expect(parseStoreUri('s3://my-bucket/runs/a/')).toEqual({ kind: 's3', bucket: 'my-bucket', prefix: 'runs/a' });
    expect(parseStoreUri('s3://my-bucket')).toEqual({ kind: 's3', bucket: 'my-bucket', prefix: '' });
    expect(parseStoreUri('file:///data/runs')).toEqual({ kind: 'file', dir: '/data/runs' });
    expect(parseStoreUri('runs', '/base')).toEqual({ kind: 'file', dir: '/base/runs' });
    expect(() => parseStoreUri('s3://Bad_Bucket/x')).toThrow(StoreConfigError);
    expect(() => parseStoreUri('gs://bucket/x')).toThrow(/unknown scheme/);
  });
});

for (const scheme of ['s3', 'file'] as const) {
  describe(`${scheme}:// store`, () => {
    let store: ArtifactStore;
    beforeAll(() => {
      store =
        scheme === 's3'
          ? openArtifactStore(`s3://${BUCKET}/${randomBytes(4).toString('hex')}`, s3)
          : openArtifactStore(`file://${path.join(work, 'file-store')}`);
    });

    it('round-trips a file and small objects, lists keys, leaves no temporary objects', async () => {
      const local = path.join(work, `${scheme}-small.txt`);
      writeFileSync(local, 'hello store\n');
      const put = await store.putFile('run/a/hello.txt', local);
      expect(put).toEqual({ sha256: sha('hello store\n'), bytes: 12 });
      await store.putBytes('run/a/b/note.json', '{"x":1}\n');
      const back = path.join(work, `${scheme}-back.txt`);
      expect((await store.getFile('run/a/hello.txt', back)).sha256).toBe(put.sha256);
      expect(readFileSync(back, 'utf8')).toBe('hello store\n');
      expect((await store.getBytes('run/a/b/note.json'))!.toString()).toBe('{"x":1}\n');
      expect(await store.getBytes('run/a/nothing.json')).toBeNull();
      expect(await store.head('run/a/nothing.json')).toBeNull();
      expect((await store.list('run/a/')).map((o) => o.key)).toEqual(['run/a/b/note.json', 'run/a/hello.txt']);
      if (scheme === 's3') expect((await store.head('run/a/hello.txt'))!.sha256).toBe(put.sha256);
      // A second write replaces the object whole.
      writeFileSync(local, 'second version\n');
      await store.putFile('run/a/hello.txt', local);
      expect((await store.getBytes('run/a/hello.txt'))!.toString()).toBe('second version\n');
      expect((await store.list('run/')).every((o) => !o.key.includes('.tmp-'))).toBe(true);
    });

    it('streams a 48 MiB file up (multipart) and down, byte for byte', async () => {
      const big = path.join(work, `${scheme}-big.bin`);
      const out = createWriteStream(big);
      for (let i = 0; i < 48; i++) out.write(randomBytes(1024 * 1024));
      await new Promise((r) => out.end(r));
      const want = await sha256File(big);
      const small = scheme === 's3' ? openArtifactStore(store.root, { ...s3, partSizeBytes: 5 * 1024 * 1024 }) : store;
      const put = await small.putFile('big/blob.bin', big);
      expect(put).toEqual({ sha256: want, bytes: 48 * 1024 * 1024 });
      const back = path.join(work, `${scheme}-big-back.bin`);
      await small.getFile('big/blob.bin', back);
      expect(await sha256File(back)).toBe(want);
    });

    it('a published artifact is a cache hit on the store until its config, inputs or bytes change', async () => {
      const local = path.join(work, `${scheme}-art`, 'samples.parquet');
      const ref = await writeParquetArtifact({
        path: local,
        schemaName: 'test.rows',
        schemaVersion: 1,
        arrowSchema: new arrow.Schema([new arrow.Field('id', new arrow.Utf8(), false)]),
        rows: [{ id: 'a' }, { id: 'b' }],
        inputs: [],
        configHash: hashConfig({ test: 1 }),
      });
      const read = await readManifest(local);
      if (read.status !== 'ok') throw new Error('no manifest');
      const stored = await publishArtifact(store, 'run/env/samples.parquet', local, read.manifest);
      expect(stored.uri).toBe(store.uriOf('run/env/samples.parquet'));
      expect(stored.sha256).toBe(ref.sha256);
      const expectation = { schemaName: 'test.rows', schemaVersion: 1, inputs: [], configHash: hashConfig({ test: 1 }) };
      expect(await checkStoredArtifact(store, 'run/env/samples.parquet', expectation)).toEqual({ hit: true, ref: stored });
      expect(await checkStoredArtifact(store, 'run/env/samples.parquet', { ...expectation, configHash: hashConfig({ test: 2 }) })).toEqual({
        hit: false,
        reason: 'config changed',
      });
      expect(await checkStoredArtifact(store, 'run/env/other.parquet', expectation)).toEqual({ hit: false, reason: 'no manifest' });
      // The artifact read back through the ref on a node that never had it: a node-local copy by sha256.
      const rows = await readParquetObjects(await localPathForRef(stored, path.join(work, `${scheme}-node-cache`)));
      expect(rows.map((r) => r.id)).toEqual(['a', 'b']);
      // The readers take the store URI itself (readRows is what the stages read samples with).
      expect((await readParquetObjects(stored.uri)).map((r) => r.id)).toEqual(['a', 'b']);
      const streamed: unknown[] = [];
      for await (const record of readRows(stored.uri)) streamed.push('row' in record ? (record.row as { id: string }).id : record.error);
      expect(streamed).toEqual(['a', 'b']);
      await store.putBytes('run/env/samples.parquet', 'tampered');
      const tampered = await checkStoredArtifact(store, 'run/env/samples.parquet', expectation);
      expect(tampered).toEqual({ hit: false, reason: `${store.uriOf('run/env/samples.parquet')} no longer matches its manifest's sha256` });
    });

    it('append-only shards: records survive a reopen, one object per append, read in order', async () => {
      const dir = 'run/judge/log';
      const a = await openStoreAppendLog(store, dir, 'worker-a');
      await a.append([{ item: 1 }, { item: 2 }]);
      await a.append([{ item: 3 }]);
      await a.close();
      const reopened = await openStoreAppendLog(store, dir, 'worker-a'); // a retry after a kill
      await reopened.append([{ item: 3 }, { item: 4 }]);
      const b = await openStoreAppendLog(store, dir, 'worker-b');
      await b.append([{ item: 9 }]);
      const log = await readStoreAppendLog<{ item: number }>(store, dir);
      expect(log.shards).toEqual(['worker-a', 'worker-b']);
      expect(log.records.map((r) => r.item)).toEqual([1, 2, 3, 3, 4, 9]);
      expect(log.malformedLines).toEqual([]);
      expect((await readStoreAppendLog(store, 'run/judge/none')).records).toEqual([]);
    });
  });
}

describe('node-local cache keyed by sha256', () => {
  it('downloads a stored object once, whatever URI names the same bytes', async () => {
    const store = openArtifactStore(`s3://${BUCKET}/cache-test`, s3);
    await store.putBytes('one.bin', 'same bytes');
    await store.putBytes('two.bin', 'same bytes');
    const cacheDir = path.join(work, 'cache');
    const first = await localCopy(store, 'one.bin', sha('same bytes'), cacheDir);
    expect(first.downloaded).toBe(true);
    expect(readFileSync(first.path, 'utf8')).toBe('same bytes');
    expect(await localCopy(store, 'one.bin', sha('same bytes'), cacheDir)).toEqual({ path: first.path, downloaded: false });
    expect(await localCopy(store, 'two.bin', sha('same bytes'), cacheDir)).toEqual({ path: first.path, downloaded: false });
    await expect(localCopy(store, 'one.bin', sha('other bytes'), cacheDir)).rejects.toThrow(/has sha256 .* but its ref says/);
  });
});

describe('store error paths are named errors', () => {
  it('a bucket that does not exist is StoreBucketNotFoundError', async () => {
    const store = openArtifactStore('s3://no-such-bucket-here/x', s3);
    await expect(store.putBytes('a.json', '{}')).rejects.toBeInstanceOf(StoreBucketNotFoundError);
    await expect(store.head('a.json')).rejects.toThrow(/s3:\/\/no-such-bucket-here\/x: the bucket does not exist/);
  });

  it('credentials the store refuses are StoreCredentialsError', async () => {
    const wrongSecret = openArtifactStore(`s3://${BUCKET}/x`, {
      ...s3,
      credentials: { accessKeyId: weed.accessKeyId, secretAccessKey: 'wrong' },
    });
    await expect(wrongSecret.putBytes('a.json', '{}')).rejects.toBeInstanceOf(StoreCredentialsError);
    const unknownKey = openArtifactStore(`s3://${BUCKET}/x`, { ...s3, credentials: { accessKeyId: 'nobody', secretAccessKey: 'nothing' } });
    await expect(unknownKey.getBytes('a.json')).rejects.toThrow(/refused the credentials/);
  });

  it('a store that is down is StoreUnreachableError', async () => {
    const down = openArtifactStore(`s3://${BUCKET}/x`, { ...s3, endpoint: 'http://127.0.0.1:1', maxAttempts: 1 });
    await expect(down.putBytes('a.json', '{}')).rejects.toBeInstanceOf(StoreUnreachableError);
    await expect(down.list('')).rejects.toThrow(/nothing answers at http:\/\/127\.0\.0\.1:1/);
  });
});

describe('atomic writes survive a crash of the store mid-upload', () => {
  it('a store killed during an upload keeps the old object whole, and no temporary object shows', async () => {
    const dir = path.join(work, 'weed-crash');
    const first = await startSeaweedS3(dir);
    let second: SeaweedS3 | undefined;
    try {
      await first.createBucket('crash-test');
      const settings = (server: SeaweedS3): S3StoreSettings => ({
        ...s3,
        endpoint: server.endpoint,
        maxAttempts: 1,
        partSizeBytes: 5 * 1024 * 1024,
      });
      const store = openArtifactStore('s3://crash-test/run', settings(first));
      await store.putBytes('model/weights.bin', 'the old weights\n');
      // The new bytes come through a FIFO, so the upload is provably in flight when the store dies.
      const fifo = path.join(work, 'upload.fifo');
      execFileSync('mkfifo', [fifo]);
      const upload = store.putFile('model/weights.bin', fifo).then(
        () => null,
        (error: unknown) => error,
      );
      const writer = createWriteStream(fifo);
      for (let i = 0; i < 12; i++) writer.write(randomBytes(1024 * 1024)); // two parts' worth and more
      await new Promise((r) => setTimeout(r, 3_000));
      await first.stop(); // SIGTERM, then SIGKILL after 10 s: the store is gone mid-upload
      // More bytes make the upload send its next part to the dead store (not awaited: once the upload gives up,
      // nobody reads the FIFO any more).
      writer.on('error', () => undefined);
      for (let i = 0; i < 12; i++) writer.write(randomBytes(1024 * 1024));
      writer.end();
      const failure = await Promise.race([upload, new Promise((r) => setTimeout(() => r('still running after 60 s'), 60_000))]);
      writer.destroy();
      expect(failure, 'the upload should fail when its store dies').toBeInstanceOf(ArtifactStoreError);
      mkdirSync(dir, { recursive: true });
      second = await startSeaweedS3(dir); // the same data directory, new ports
      const after = openArtifactStore('s3://crash-test/run', settings(second));
      // A restarted SeaweedFS answers InternalError until its volume server has registered with its master again
      // (seconds on a loaded machine): wait for it to serve, then read. A missing object is null, not an error.
      const readWhenServing = async (deadline = Date.now() + 60_000): Promise<Buffer | null> => {
        for (;;) {
          try {
            return await after.getBytes('model/weights.bin');
          } catch (error) {
            if (Date.now() > deadline) throw error;
            await new Promise((r) => setTimeout(r, 500));
          }
        }
      };
      expect((await readWhenServing())!.toString()).toBe('the old weights\n');
      // Every object in the bucket, seen raw (the store's own list hides in-flight temporary keys).
      const raw = new S3Client({ endpoint: second.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: s3.credentials! });
      const listed = await raw.send(new ListObjectsV2Command({ Bucket: 'crash-test' }));
      expect((listed.Contents ?? []).map((o) => o.Key)).toEqual(['run/model/weights.bin']);
    } finally {
      await first.stop();
      await second?.stop();
    }
  }, 180_000);
});

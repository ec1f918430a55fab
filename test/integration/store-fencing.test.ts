import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileStoreUri, openArtifactStore, type S3StoreSettings } from '../../lib/artifacts/store';
import { startSeaweedS3, type SeaweedS3 } from '../support/seaweedfs';
import { fencingScenarios } from '../support/store-fencing-scenarios';

/**
 * The run lease (lib/store-sync/fencing.ts) against the pinned SeaweedFS (scripts/ensure-seaweedfs.sh), whose
 * S3 gateway enforces `If-None-Match: *` on PutObject, and against a `file://` store: the same two-writer
 * cases on both.
 */
const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-store-fencing-it-'));
const BUCKET = 'codegrep-fencing';
let weed: SeaweedS3;
let s3: S3StoreSettings;
let n = 0;

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
}, 180_000);

afterAll(async () => {
  await weed?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('the run lease on SeaweedFS (S3 If-None-Match: *)', () => {
  it('the pinned SeaweedFS enforces If-None-Match: * on PutObject', async () => {
    const store = openArtifactStore(`s3://${BUCKET}/probe`, s3);
    expect(await store.conditionalWrites()).toBe('atomic');
    expect(await store.putBytesIfAbsent('once.json', '1')).toBe(true);
    expect(await store.putBytesIfAbsent('once.json', '2')).toBe(false);
    expect((await store.getBytes('once.json'))!.toString('utf8')).toBe('1');
    // The probe object is gone again.
    expect(await store.list('.codegrep-conditional-probe')).toEqual([]);
  });
  fencingScenarios(() => openArtifactStore(`s3://${BUCKET}/run-${++n}`, s3));
});

describe('the run lease on a file:// store', () => {
  fencingScenarios(() => openArtifactStore(fileStoreUri(path.join(work, `file-store-${++n}`))));
});

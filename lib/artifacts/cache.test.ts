import * as arrow from 'apache-arrow';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkCachedArtifact, findCachedArtifact } from './cache';
import { hashConfig } from './config-hash';
import { manifestPathFor } from './manifest';
import { fakeInputRef, makeTempDir } from './test-helpers';
import { writeJsonArtifact } from './write-json';
import { writeParquetArtifact } from './write-parquet';

let dir: string;
let cleanup: () => Promise<void>;
beforeEach(async () => ({ dir, cleanup } = await makeTempDir()));
afterEach(() => cleanup());

const inputs = [fakeInputRef('judgements'), fakeInputRef('patches')];
const expectation = { schemaName: 'labels', schemaVersion: 1, inputs, configHash: hashConfig({ minWeight: 0.15 }) };

async function writeLabels(path: string) {
  return writeParquetArtifact({
    ...expectation,
    path,
    arrowSchema: new arrow.Schema([
      new arrow.Field('file', new arrow.Utf8(), false),
      new arrow.Field('weight', new arrow.Float64(), false),
    ]),
    rows: [
      { file: 'django/db/models/query.py', weight: 1.3 },
      { file: 'django/db/models/sql/compiler.py', weight: 0.4 },
    ],
  });
}

describe('findCachedArtifact', () => {
  it('returns the existing ref when manifest, inputs, config and bytes all match', async () => {
    const path = join(dir, 'labels.parquet');
    const ref = await writeLabels(path);
    expect(await findCachedArtifact(path, expectation)).toEqual(ref);
  });

  it('misses when the config, an input, the input order, the schema or its version changed', async () => {
    const path = join(dir, 'labels.parquet');
    await writeLabels(path);
    const misses: [object, string][] = [
      [{ configHash: hashConfig({ minWeight: 0.2 }) }, 'config changed'],
      [{ inputs: [inputs[0]!, fakeInputRef('patches-v2')] }, 'inputs changed'],
      [{ inputs: [inputs[1]!, inputs[0]!] }, 'inputs changed'],
      [{ inputs: [inputs[0]!] }, 'inputs changed'],
      [{ schemaName: 'weights' }, 'schema is labels, expected weights'],
      [{ schemaVersion: 2 }, 'schema version is 1, expected 2'],
    ];
    for (const [change, reason] of misses) {
      expect(await findCachedArtifact(path, { ...expectation, ...change })).toBeNull();
      expect(await checkCachedArtifact(path, { ...expectation, ...change })).toEqual({ hit: false, reason });
    }
  });

  it('never trusts a file whose bytes changed after its manifest was written', async () => {
    const path = join(dir, 'labels.parquet');
    await writeLabels(path);
    const bytes = await readFile(path);
    const flipped = Buffer.from(bytes);
    flipped[Math.floor(bytes.length / 2)]! ^= 0xff;
    await writeFile(path, flipped);
    expect(await findCachedArtifact(path, expectation)).toBeNull();
    expect(await checkCachedArtifact(path, expectation)).toMatchObject({ hit: false, reason: expect.stringMatching(/no longer matches/) });

    await writeFile(path, Buffer.concat([bytes, Buffer.from('\n')]));
    expect(await findCachedArtifact(path, expectation)).toBeNull();
    await writeFile(path, bytes);
    expect(await findCachedArtifact(path, expectation)).not.toBeNull();
  });

  it('misses without a manifest, with a damaged manifest, or without the file', async () => {
    const path = join(dir, 'labels.parquet');
    expect(await checkCachedArtifact(path, expectation)).toEqual({ hit: false, reason: 'no manifest' });
    await writeLabels(path);
    const manifest = await readFile(manifestPathFor(path), 'utf8');
    await writeFile(manifestPathFor(path), manifest.slice(0, 40));
    expect(await findCachedArtifact(path, expectation)).toBeNull();
    await writeFile(manifestPathFor(path), manifest);
    await rm(path);
    expect(await checkCachedArtifact(path, expectation)).toMatchObject({
      hit: false,
      reason: expect.stringMatching(/is missing although its manifest exists/),
    });
  });

  it('works the same for JSON artifacts', async () => {
    const path = join(dir, 'summary.json');
    const ref = await writeJsonArtifact(path, { f1: 0.5 }, expectation);
    expect(await findCachedArtifact(path, expectation)).toEqual(ref);
    await writeFile(path, '{"f1": 0.9}\n');
    expect(await findCachedArtifact(path, expectation)).toBeNull();
  });
});

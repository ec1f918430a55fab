import * as arrow from 'apache-arrow';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ArtifactManifestSchema } from '../../schemas/artifact-manifest';
import { codeVersion } from './code-version';
import { hashConfig } from './config-hash';
import { manifestPathFor, readManifest } from './manifest';
import { fakeInputRef, makeTempDir, repoRoot } from './test-helpers';
import { readJsonArtifact, writeJsonArtifact } from './write-json';
import { writeParquetArtifact } from './write-parquet';

let dir: string;
let cleanup: () => Promise<void>;
beforeEach(async () => ({ dir, cleanup } = await makeTempDir()));
afterEach(() => cleanup());

const gitHead = () => execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: repoRoot, encoding: 'utf8' }).trim();

describe('artifact manifest', () => {
  it('records schema, rows, sha256, uri, inputs, config hash, code version and creation time', async () => {
    const inputs = [fakeInputRef('trajectories'), fakeInputRef('instances')];
    const configHash = hashConfig({ minReasoningTokens: 30 });
    const path = join(dir, 'views.parquet');
    const startedAt = Date.now();
    const ref = await writeParquetArtifact({
      path,
      schemaName: 'file-views',
      schemaVersion: 3,
      arrowSchema: new arrow.Schema([new arrow.Field('path', new arrow.Utf8(), false)]),
      rows: [{ path: 'a.py' }, { path: 'b.py' }, { path: 'c.py' }],
      inputs,
      configHash,
    });

    const manifest = ArtifactManifestSchema.parse(JSON.parse(await readFile(`${path}.manifest.json`, 'utf8')));
    expect(manifest).toEqual({
      schema: 'file-views',
      schemaVersion: 3,
      rows: 3,
      sha256: createHash('sha256')
        .update(await readFile(path))
        .digest('hex'),
      uri: path,
      inputs,
      configHash,
      codeVersion: gitHead(),
      createdAt: manifest.createdAt,
    });
    const created = Date.parse(manifest.createdAt);
    expect(created).toBeGreaterThanOrEqual(startedAt - 1000);
    expect(created).toBeLessThanOrEqual(Date.now());
    expect(ref).toEqual({ uri: path, sha256: manifest.sha256, rows: 3, schema: 'file-views', schemaVersion: 3 });
    expect(await readManifest(path)).toEqual({ status: 'ok', manifest });
  });

  it('uses the git HEAD short sha of the project as code version', async () => {
    expect(await codeVersion()).toBe(gitHead());
  });

  it('reports a missing, non-JSON or off-schema manifest instead of throwing', async () => {
    const path = join(dir, 'x.parquet');
    expect(await readManifest(path)).toEqual({ status: 'missing' });
    await writeFile(manifestPathFor(path), '{"schema": "x"');
    expect(await readManifest(path)).toMatchObject({ status: 'invalid', reason: expect.stringMatching(/is not valid JSON/) });
    await writeFile(manifestPathFor(path), JSON.stringify({ schema: 'x', rows: -1 }));
    expect(await readManifest(path)).toMatchObject({
      status: 'invalid',
      reason: expect.stringMatching(/does not match the manifest schema: .*rows/),
    });
  });
});

describe('writeJsonArtifact', () => {
  it('writes the value atomically with a one-row manifest and reads it back', async () => {
    const summary = { meanFBeta: 0.61, instances: 48, perRepo: { django: 14, sympy: 8 } };
    const path = join(dir, 'summaries', 'retrieval-summary.json');
    const configHash = hashConfig({ beta: 0.5 });
    const ref = await writeJsonArtifact(path, summary, {
      schemaName: 'retrieval-summary',
      schemaVersion: 1,
      inputs: [fakeInputRef('preds')],
      configHash,
    });

    const bytes = await readFile(path);
    expect(ref).toEqual({
      uri: path,
      sha256: createHash('sha256').update(bytes).digest('hex'),
      rows: 1,
      schema: 'retrieval-summary',
      schemaVersion: 1,
    });
    expect(await readJsonArtifact(path)).toEqual(summary);
    const manifest = await readManifest(path);
    expect(manifest).toMatchObject({
      status: 'ok',
      manifest: { rows: 1, inputs: [fakeInputRef('preds')], configHash, sha256: ref.sha256 },
    });
    expect((await readdir(join(dir, 'summaries'))).sort()).toEqual(['retrieval-summary.json', 'retrieval-summary.json.manifest.json']);
  });

  it('refuses a value with no JSON form and a malformed config hash, writing nothing', async () => {
    const path = join(dir, 's.json');
    const options = { schemaName: 's', schemaVersion: 1, inputs: [], configHash: hashConfig({}) };
    await expect(writeJsonArtifact(path, undefined, options)).rejects.toThrow(/has no JSON form/);
    await expect(writeJsonArtifact(path, {}, { ...options, configHash: 'abc' })).rejects.toThrow(/Invalid provenance .*configHash/);
    expect(await readdir(dir)).toEqual([]);
  });
});

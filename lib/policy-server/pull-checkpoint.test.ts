import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { openArtifactStore, pushDirectory } from '../artifacts/store';
import { storeTraining } from '../store-sync';
import { pullServedCheckpoint } from './pull-checkpoint';
import { resolveServedCheckpoint } from './served-checkpoint';

const root = mkdtempSync(path.join(os.tmpdir(), 'codegrep-policy-pull-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('a checkpoint served from the run store', () => {
  it('a node with an empty data dir pulls the chosen checkpoint and its trainer config, then serves it by the same sha256', async () => {
    const storeUri = pathToFileURL(path.join(root, 'store')).href;
    const store = openArtifactStore(storeUri);
    const keys = storeTraining('run-s');
    // What a GPU segment pushed: two checkpoints (files, then the marker) and its attempt's config.
    const pushed = path.join(root, 'pushed');
    for (const step of [1, 2]) {
      const dir = path.join(pushed, `step-${step}`);
      mkdirSync(dir, { recursive: true });
      writeFileSync(path.join(dir, 'adapter_model.safetensors'), `adapter ${step}`);
      writeFileSync(path.join(dir, 'COMPLETE'), `step ${step}\n`);
      await pushDirectory(store, dir, keys.checkpoint(step), keys.marker(step));
    }
    await store.putBytes(
      `${keys.segmentDir(1)}/attempt-01.config.json`,
      JSON.stringify({ model_path: '/models/tiny', recipe: 'codegrep-v3' }),
    );

    const nodeRunDir = path.join(root, 'node', 'run-s');
    await expect(pullServedCheckpoint(store, 'run-s', nodeRunDir, 'latest', null)).resolves.toBe(2);
    const served = await resolveServedCheckpoint({ runId: 'run-s', runDir: nodeRunDir }, 2);
    expect(served.adapterSha256).toBe(createHash('sha256').update('adapter 2').digest('hex'));
    expect(served.baseModel).toBe('/models/tiny');
    expect(existsSync(path.join(nodeRunDir, 'training', 'trainer', 'checkpoints', 'step-00000001'))).toBe(false);

    await expect(pullServedCheckpoint(store, 'run-s', nodeRunDir, 1, null)).resolves.toBe(1);
    await expect(pullServedCheckpoint(store, 'run-s', nodeRunDir, 7, null)).rejects.toThrow(
      /no checkpoint at step 7 in the store .* \(it has 1, 2\)/,
    );
    await expect(pullServedCheckpoint(store, 'run-s', nodeRunDir, 'best', null)).rejects.toThrow(/best needs validation metrics/);
  });
});

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { RowRecord } from '../../schemas/rows';
import { SAMPLES_SCHEMA_NAME, type Sample } from '../../schemas/samples';
import { treeKey, type WorktreeResult } from '../../schemas/worktrees';
import { buildFixtureRepo } from '../../test/support/fixture-repos';
import { buildSamples, RetainedLabelIndex } from '../labels/samples';
import { groundTruthRows } from './ground-truth-rows';
import { emptyGroundTruthSummary, samplesWithoutGoldPatchMessage } from './sample-ground-truth';

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-gt-rows-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

async function samplesOf(instances: object[]): Promise<Sample[]> {
  const records = (async function* (): AsyncGenerator<RowRecord> {
    for (const [i, row] of instances.entries()) yield { ordinal: i + 1, row };
  })();
  const samples: Sample[] = [];
  for await (const sample of buildSamples(records, new RetainedLabelIndex()).samples) samples.push(sample);
  return samples;
}

describe('groundTruthRows', () => {
  it('derives ground truth from the gold patch the sample carries, with no instances file', async () => {
    const mirrors = path.join(work, 'mirrors');
    const instances = buildFixtureRepo(work, mirrors);
    const samples = await samplesOf(instances);
    const bare = path.join(mirrors, 'acme__widgets.git');
    // Bare-repository rows (`checkout: false`): the row is the repository, read at the sample's commit.
    const worktrees = new Map<string, WorktreeResult>(
      samples.map((s) => {
        const row: WorktreeResult = {
          repo: s.repo,
          commit: s.baseCommit!,
          path: bare,
          status: 'created',
          ms: 1,
          bytes: 0,
          error: null,
          errorCode: null,
          bugPatchSha256: null,
          patchedFrom: null,
        };
        return [treeKey(row), row];
      }),
    );
    const summary = emptyGroundTruthSummary();
    const done: number[] = [];
    const rows = await groundTruthRows(samples, worktrees, { checkout: false, summary, onRow: (n) => done.push(n) });

    expect(done).toEqual([1, 2]);
    expect(summary).toMatchObject({ samples: 2, withGroundTruth: 2, patchErrors: 0, fromFileChanges: 0 });
    const [first] = rows as [Record<string, unknown>];
    expect(first).toMatchObject({
      instanceId: 'acme__widgets-1',
      goldPatch: instances[0]!.patch,
      fileChangeTargets: null,
      gold_files: ['widgets/gears.py'],
      gold_functions: ['widgets/gears.py:Gear.circumference', 'widgets/gears.py:mesh'],
      worktreePath: null,
      gitDir: bare,
      groundTruthError: null,
    });
  });
});

describe('samplesWithoutGoldPatchMessage', () => {
  const ref = (schemaVersion: number) => ({
    uri: '/run/catm/samples.parquet',
    sha256: 'a'.repeat(64),
    rows: 1,
    schema: SAMPLES_SCHEMA_NAME,
    schemaVersion,
  });

  it('asks for the catm stage again when the samples predate their gold patch', () => {
    expect(samplesWithoutGoldPatchMessage(ref(2))).toBe(
      'samples /run/catm/samples.parquet are schema version 2, written before samples carried their gold patch (version 3): ' +
        'run the catm stage again to write them',
    );
    expect(samplesWithoutGoldPatchMessage(ref(3))).toBeNull();
  });
});

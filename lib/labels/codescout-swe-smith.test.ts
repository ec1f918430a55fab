import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseInstanceRecord } from '../../schemas/instances';
import type { RowRecord } from '../../schemas/rows';
import { SampleSchema, type Sample } from '../../schemas/samples';
import { buildSweSmithFixture, parquetFields, SWE_SMITH_FIELDS, type SweSmithFixture } from '../../test/fixtures/codescout/swe-smith';
import { readRows } from '../artifacts/read-rows';
import { buildSamples, noSamplesMessage, RetainedLabelIndex, sha256Hex } from './samples';

// CodeScout's SWE-Smith rows (its data/swe_smith and data/qwen3_1.7b_data Parquet files) read as they are:
// base_commit null + use_patch true, prompt as the task text, file_changes (with nulls) as the targets.
let root: string;
let fixture: SweSmithFixture;
beforeAll(() => {
  root = mkdtempSync(path.join(tmpdir(), 'codegrep-swesmith-'));
  fixture = buildSweSmithFixture(root);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}
async function* fromArray(records: RowRecord[]): AsyncGenerator<RowRecord> {
  yield* records;
}

describe("CodeScout's SWE-Smith Parquet layout", () => {
  it('the fixture has the exact Arrow schema of CodeScout’s files (Null base_commit and added_modules)', () => {
    expect(parquetFields(fixture.parquet)).toEqual(SWE_SMITH_FIELDS);
  });

  it('every row parses: use_patch, null base_commit, null added_* lists, the prompt', async () => {
    const parsed = (await collect(readRows(fixture.parquet))).map((r) => parseInstanceRecord(r));
    expect(parsed.map((p) => p.ok)).toEqual([true, true, true, true]);
    const first = parsed[0]!.ok ? parsed[0]!.instance : undefined;
    expect(first).toMatchObject({ repo: 'swesmith/acme__widgets.0123abcd', base_commit: null, use_patch: true });
    expect(first!.file_changes![0]!.changes).toEqual({
      added_entities: null,
      added_modules: null,
      edited_entities: ['widgets/gears.py:Gear.circumference'],
      edited_modules: ['widgets/gears.py:Gear'],
    });
  });

  it('turns each row into a sample with the bug patch, its sha256, the prompt as problem statement and file_changes files', async () => {
    const run = buildSamples(readRows(fixture.parquet), new RetainedLabelIndex(), { source: 'swe-smith' });
    const samples: Sample[] = await collect(run.samples);
    expect(samples).toHaveLength(4);
    samples.forEach((s) => expect(SampleSchema.parse(s)).toEqual(s));
    const [first, second] = samples as [Sample, Sample];
    expect(first).toMatchObject({
      instanceId: 'acme__widgets.0123abcd.lm_rewrite__circ0001',
      repo: 'swesmith/acme__widgets.0123abcd',
      baseCommit: null,
      bugPatch: fixture.rows[0]!.patch,
      bugPatchSha256: sha256Hex(fixture.rows[0]!.patch),
      problemStatement: 'Gear.circumference ignores the number of teeth.\n(as the prompt shows it)',
      goldFiles: ['widgets/gears.py'],
      targetFiles: ['widgets/gears.py'],
      // The fix comes from the tree (the bug patch reversed); the targets are file_changes'.
      goldPatch: null,
      fileChangeTargets: {
        files: ['widgets/gears.py'],
        modules: ['widgets/gears.py:Gear'],
        functions: ['widgets/gears.py:Gear.circumference'],
      },
    });
    expect(second.bugPatchSha256).not.toBe(first.bugPatchSha256);
    expect(run.summary()).toMatchObject({ instancesRead: 4, samplesWritten: 4 });
  });

  it('base_commit must be null with use_patch and a full commit without it; Verified-style CodeScout rows still read', async () => {
    const row = fixture.rows[0]!;
    const records: RowRecord[] = [
      { ordinal: 1, row: { ...row, base_commit: 'a'.repeat(40) } },
      { ordinal: 2, row: { ...row, use_patch: false } },
      { ordinal: 3, row: { ...row, instance_id: 'verified-1', repo: 'acme/widgets', use_patch: false, base_commit: 'b'.repeat(40) } },
      { ordinal: 4, row: { ...row, instance_id: 'no-text', prompt: null, problem_statement: null } },
    ];
    const run = buildSamples(fromArray(records), new RetainedLabelIndex(), { source: 'mixed' });
    const samples = await collect(run.samples);
    expect(samples.map((s) => [s.instanceId, s.baseCommit, s.bugPatch])).toEqual([['verified-1', 'b'.repeat(40), null]]);
    expect(samples[0]).toMatchObject({ goldPatch: row.patch, fileChangeTargets: { files: ['widgets/gears.py'] } });
    const summary = run.summary();
    expect(summary.instancesSkipped['missingOrInvalid:base_commit']).toBe(2);
    expect(summary.instancesSkipped['missingOrInvalid:problem_statement']).toBe(1);
    expect(summary.examples.map((e) => e.detail)).toEqual([
      expect.stringMatching(/row 1: column base_commit: must be null with use_patch: true/),
      expect.stringMatching(
        /row 2: column base_commit: expected a full 40-hex-digit commit id \(null only with use_patch: true\) \(got null\)/,
      ),
      expect.stringMatching(/row 4: column problem_statement: expected a string, or a prompt with a user message/),
    ]);
  });

  it('a pass that read rows and wrote no sample names every skip reason with its count', async () => {
    const rows = fixture.rows.map((row, i) => ({ ordinal: i + 1, row: { ...row, use_patch: null } }));
    const run = buildSamples(fromArray(rows), new RetainedLabelIndex(), { source: 'swe-smith.parquet' });
    await collect(run.samples);
    const message = noSamplesMessage(run.summary(), 'instances swe-smith.parquet');
    expect(message).toMatch(
      /^no sample from the 4 rows of instances swe-smith\.parquet: skipped missingOrInvalid:base_commit 4\. First of each: /,
    );
    expect(noSamplesMessage({ ...run.summary(), samplesWritten: 1 }, 'x')).toBeNull();
    expect(noSamplesMessage({ ...run.summary(), instancesRead: 0 }, 'x')).toBeNull();
  });
});

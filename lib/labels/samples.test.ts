import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  MINED_CANDIDATES_SCHEMA_NAME,
  MINED_CANDIDATES_SCHEMA_VERSION,
  minedCandidatesArrowSchema,
  type MinedCandidate,
} from '../../schemas/mining';
import type { RowRecord } from '../../schemas/rows';
import {
  CATM_LABELS_SCHEMA_NAME,
  CATM_LABELS_SCHEMA_VERSION,
  catmLabelsArrowSchema,
  SampleSchema,
  SAMPLES_SCHEMA_NAME,
  SAMPLES_SCHEMA_VERSION,
  samplesArrowSchema,
  type CatmLabel,
  type Sample,
} from '../../schemas/samples';
import { hashConfig } from '../artifacts/config-hash';
import { readRows } from '../artifacts/read-rows';
import { writeParquetArtifact } from '../artifacts/write-parquet';
import { mineTrajectories } from '../trajectories/mine-trajectories';
import { buildSamples, indexRetainedLabels, mergeTargetFiles } from './samples';
import { computeWeights } from './weights';

const DATA = path.resolve(__dirname, '../../../shared/data');
const VERIFIED = path.join(DATA, 'swebench_verified.jsonl');
const TRAJECTORIES = path.join(DATA, 'openhands_trajectories.sample.jsonl');

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

async function* fromArray(records: RowRecord[]): AsyncGenerator<RowRecord> {
  yield* records;
}

/** Stages 1 and 3 on the real sample, with the judge in its offline mode (every candidate SKIPPED = kept). */
let realLabelsOnce: Promise<{ candidates: MinedCandidate[]; labels: CatmLabel[] }> | undefined;
const realLabels = () => (realLabelsOnce ??= mineAndWeighSample());
async function mineAndWeighSample(): Promise<{ candidates: MinedCandidate[]; labels: CatmLabel[] }> {
  const candidates = await collect(mineTrajectories(readRows(TRAJECTORIES)).candidates);
  const weights = computeWeights(candidates.map((c) => c.postReasoningTokens));
  const labels = candidates.map((c, i) => ({
    instanceId: c.instanceId,
    trajectoryId: c.trajectoryId,
    repo: c.repo,
    path: c.path,
    postReasoningTokens: c.postReasoningTokens,
    verdict: 'SKIPPED' as const,
    unnormalizedWeight: weights.unnormalized[i]!,
    weight: weights.weights[i]!,
    retained: weights.retained[i]!,
  }));
  return { candidates, labels };
}

function label(overrides: Partial<CatmLabel>): CatmLabel {
  return {
    instanceId: 'django__django-14534',
    trajectoryId: 't1',
    repo: 'django/django',
    path: 'django/forms/widgets.py',
    postReasoningTokens: 60,
    verdict: 'RELEVANT',
    unnormalizedWeight: 0.5,
    weight: 1,
    retained: true,
    ...overrides,
  };
}

const verifiedLine = (instanceId: string): string =>
  readFileSync(VERIFIED, 'utf8')
    .split('\n')
    .find((l) => l.includes(`"instance_id": "${instanceId}"`))!;

describe('mergeTargetFiles: G(x) = gold ∪ CATM', () => {
  it('puts gold files first, in patch order, and adds each CATM file once', () => {
    expect(mergeTargetFiles(['b.py', 'a.py'], [{ path: 'c.py' }, { path: 'a.py' }, { path: 'd.py' }, { path: 'c.py' }])).toEqual([
      'b.py',
      'a.py',
      'c.py',
      'd.py',
    ]);
    expect(mergeTargetFiles(['a.py'], [])).toEqual(['a.py']);
    expect(mergeTargetFiles([], [{ path: 'x.py' }])).toEqual(['x.py']);
  });
});

describe('buildSamples on SWE-bench Verified and the mined sample', () => {
  it('merges retained labels into their instance; instances without trajectories keep gold-only targets', async () => {
    const { labels } = await realLabels();
    const index = await indexRetainedLabels(labels);
    const run = buildSamples(readRows(VERIFIED), index);
    const samples = await collect(run.samples);
    const summary = run.summary();

    expect(samples).toHaveLength(500);
    samples.forEach((s) => expect(SampleSchema.parse(s)).toEqual(s));
    const withLabels = new Set(labels.filter((l) => l.retained).map((l) => l.instanceId));
    expect(summary).toMatchObject({
      instancesRead: 500,
      samplesWritten: 500,
      samplesWithCatm: withLabels.size,
      labelsRead: 74,
      labelsRetained: 74,
      labelsNotRetained: 0,
      labelsUsed: 74,
      labelsRepoMismatch: 0,
      labelsWithoutInstance: 0,
    });
    expect(Object.values(summary.instancesSkipped).every((n) => n === 0)).toBe(true);

    // Instances without a trajectory: target = gold.
    const astropy = samples.find((s) => s.instanceId === 'astropy__astropy-12907')!;
    expect(astropy).toMatchObject({
      repo: 'astropy/astropy',
      baseCommit: 'd16bfe05a744909de4b27f5875fe0d4ed41ce607',
      goldFiles: ['astropy/modeling/separable.py'],
      catmFiles: [],
      targetFiles: ['astropy/modeling/separable.py'],
      fileChangeTargets: null,
    });
    // What ground truth needs travels with the sample: the instance's gold patch, as the instances file has it.
    expect(astropy.goldPatch).toBe(JSON.parse(verifiedLine('astropy__astropy-12907')).patch);
    expect(samples.filter((s) => s.catmFiles.length === 0).every((s) => s.targetFiles.join() === s.goldFiles.join())).toBe(true);

    // django-14534: gold boundfield.py; the agent read boundfield.py (93 tokens) and widgets.py (126 tokens).
    const django = samples.find((s) => s.instanceId === 'django__django-14534')!;
    expect(django.goldFiles).toEqual(['django/forms/boundfield.py']);
    expect(django.catmFiles.map((f) => [f.path, f.postReasoningTokens, f.trajectoryId, f.verdict])).toEqual([
      ['django/forms/widgets.py', 126, 'oh-claude35-django__django-14534', 'SKIPPED'],
      ['django/forms/boundfield.py', 93, 'oh-claude35-django__django-14534', 'SKIPPED'],
    ]);
    expect(django.catmFiles[0]!.weight).toBeGreaterThan(django.catmFiles[1]!.weight);
    expect(django.targetFiles).toEqual(['django/forms/boundfield.py', 'django/forms/widgets.py']);

    // pylint-4661: gold config/__init__.py and setup.cfg; CATM adds tests/lint/unittest_lint.py.
    const pylint = samples.find((s) => s.instanceId === 'pylint-dev__pylint-4661')!;
    expect(pylint.targetFiles).toEqual(['pylint/config/__init__.py', 'setup.cfg', 'tests/lint/unittest_lint.py']);
    expect(summary.catmOnlyTargets).toBe(samples.reduce((n, s) => n + s.targetFiles.length - s.goldFiles.length, 0));
  });

  it('keeps one catmFiles entry per path (the strongest over trajectories), drops unretained labels, counts the rest', async () => {
    const index = await indexRetainedLabels([
      label({ trajectoryId: 't1', path: 'django/forms/widgets.py', weight: 0.9 }),
      label({ trajectoryId: 't2', path: 'django/forms/./widgets.py', weight: 1.4, postReasoningTokens: 140 }),
      label({ trajectoryId: 't2', path: 'django/forms/boundfield.py', weight: 1.1 }),
      label({ trajectoryId: 't3', path: 'django/forms/forms.py', weight: 0.1, retained: false }),
      label({ trajectoryId: 't4', path: 'sympy/core/basic.py', repo: 'sympy/sympy', weight: 2 }),
      label({ instanceId: 'not__an-instance', trajectoryId: 't5', weight: 1 }),
    ]);
    const run = buildSamples(fromArray([{ ordinal: 1, row: JSON.parse(verifiedLine('django__django-14534')) }]), index);
    const [sample] = (await collect(run.samples)) as [Sample];
    expect(sample.catmFiles).toEqual([
      { path: 'django/forms/widgets.py', weight: 1.4, trajectoryId: 't2', postReasoningTokens: 140, verdict: 'RELEVANT' },
      { path: 'django/forms/boundfield.py', weight: 1.1, trajectoryId: 't2', postReasoningTokens: 60, verdict: 'RELEVANT' },
    ]);
    expect(sample.targetFiles).toEqual(['django/forms/boundfield.py', 'django/forms/widgets.py']);
    const summary = run.summary();
    expect(summary).toMatchObject({
      labelsRead: 6,
      labelsRetained: 5,
      labelsNotRetained: 1,
      labelsUsed: 3,
      labelsRepoMismatch: 1,
      labelsWithoutInstance: 1,
      samplesWithCatm: 1,
      catmOnlyTargets: 1,
    });
    expect(summary.labelsUsed + summary.labelsRepoMismatch + summary.labelsWithoutInstance).toBe(summary.labelsRetained);
  });

  it('counts bad instance rows by reason, names row and column, and still writes the good ones', async () => {
    const good = JSON.parse(verifiedLine('django__django-14534')) as Record<string, unknown>;
    const other = JSON.parse(verifiedLine('django__django-14007')) as Record<string, unknown>;
    const lines = [
      JSON.stringify(good),
      '{"instance_id": "broken", "repo": ',
      JSON.stringify({ ...other, base_commit: 'abc123' }),
      JSON.stringify({ ...other, instance_id: undefined }),
      JSON.stringify({ ...other, patch: 'diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n-a\n' }),
      JSON.stringify(good),
      JSON.stringify(other),
    ];
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'samples-bad-')), 'instances.jsonl');
    writeFileSync(file, lines.join('\n') + '\n');
    const index = await indexRetainedLabels([label({ instanceId: 'django__django-14007', path: 'django/db/models/base.py' })]);
    const run = buildSamples(readRows(file), index, { source: file });
    const samples = await collect(run.samples);
    expect(samples.map((s) => s.instanceId)).toEqual(['django__django-14534', 'django__django-14007']);
    const summary = run.summary();
    expect(summary.instancesRead).toBe(7);
    expect(summary.instancesSkipped).toEqual({
      malformedRow: 1,
      'missingOrInvalid:instance_id': 1,
      'missingOrInvalid:repo': 0,
      'missingOrInvalid:base_commit': 1,
      'missingOrInvalid:problem_statement': 0,
      'missingOrInvalid:patch': 0,
      'missingOrInvalid:file_changes': 0,
      'missingOrInvalid:use_patch': 0,
      'missingOrInvalid:prompt': 0,
      duplicateInstanceId: 1,
      unparseablePatch: 1,
    });
    expect(summary.samplesWritten + Object.values(summary.instancesSkipped).reduce((a, b) => a + b, 0)).toBe(summary.instancesRead);
    const details = summary.examples.map((e) => `${e.ordinal} ${e.reason}: ${e.detail}`);
    expect(details).toContainEqual(
      `3 missingOrInvalid:base_commit: ${file} row 3: column base_commit: expected a full 40-hex-digit commit id (null only with use_patch: true) (got "abc123")`,
    );
    expect(details.find((d) => d.startsWith('4 '))).toMatch(/row 4: column instance_id: .*\(missing\)/);
    expect(details.find((d) => d.startsWith('5 '))).toMatch(/row 5 \(django__django-14007\): column patch: /);
    expect(details.find((d) => d.startsWith('6 '))).toMatch(
      /duplicateInstanceId: .*row 6: instance django__django-14534 already has a sample/,
    );
    // The label of django-14007 went into the sample from row 7 (row 5, same id, had a bad patch).
    expect(samples[1]!.targetFiles).toEqual(['django/db/models/sql/compiler.py', 'django/db/models/base.py']);
  });
});

describe('Arrow schemas round-trip through the Parquet artifact writer', () => {
  it('writes and reads back mined candidates, labels and samples (lists of structs included)', async () => {
    const { candidates, labels } = await realLabels();
    const index = await indexRetainedLabels(labels);
    const verified = await collect(buildSamples(readRows(VERIFIED), index).samples);
    // A CodeScout-layout sample's file_changes targets (a struct of lists) beside the null ones of SWE-bench.
    const targets = { files: ['a.py'], modules: ['a.py:A'], functions: ['a.py:A.f', 'a.py:g'] };
    const samples = [...verified, { ...verified[0]!, instanceId: 'with-targets', goldPatch: null, fileChangeTargets: targets }];
    const dir = mkdtempSync(path.join(tmpdir(), 'catm-parquet-'));
    const configHash = hashConfig({ test: 'catm-schemas' });
    const cases = [
      {
        name: 'candidates',
        schemaName: MINED_CANDIDATES_SCHEMA_NAME,
        schemaVersion: MINED_CANDIDATES_SCHEMA_VERSION,
        arrowSchema: minedCandidatesArrowSchema,
        rows: candidates,
      },
      {
        name: 'labels',
        schemaName: CATM_LABELS_SCHEMA_NAME,
        schemaVersion: CATM_LABELS_SCHEMA_VERSION,
        arrowSchema: catmLabelsArrowSchema,
        rows: labels,
      },
      {
        name: 'samples',
        schemaName: SAMPLES_SCHEMA_NAME,
        schemaVersion: SAMPLES_SCHEMA_VERSION,
        arrowSchema: samplesArrowSchema,
        rows: samples,
      },
    ];
    for (const c of cases) {
      const file = path.join(dir, `${c.name}.parquet`);
      const ref = await writeParquetArtifact({
        path: file,
        schemaName: c.schemaName,
        schemaVersion: c.schemaVersion,
        arrowSchema: c.arrowSchema,
        rows: c.rows as unknown as Record<string, unknown>[],
        inputs: [],
        configHash,
      });
      expect(ref).toMatchObject({ rows: c.rows.length, schema: c.schemaName, schemaVersion: c.schemaVersion });
      const back = (await collect(readRows(file))).map((r) => ('row' in r ? r.row : r.error));
      expect({ name: c.name, rows: back }).toEqual({ name: c.name, rows: c.rows });
    }
  });
});

import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readParquetObjects, readParquetTable, writeParquetArtifact } from '../../lib/artifacts';
import {
  DOWNSTREAM_RUNS_SCHEMA_NAME,
  DOWNSTREAM_RUNS_SCHEMA_VERSION,
  DownstreamRunRowSchema,
  downstreamRunsArrowSchema,
  type DownstreamRunRow,
} from './runs';
import { InjectionConfigurationSchema } from './injection';
import { DownstreamInstanceSchema } from './instance';

const rows: DownstreamRunRow[] = [
  {
    configuration: 'baseline',
    instanceId: 'django__django-15278',
    resolved: false,
    outcome: 'unresolved',
    rounds: 74,
    inputTokens: 3_071_000,
    outputTokens: 21_500,
    patchBytes: 1893,
    endReason: 'round_limit',
    error: null,
    servedModel: null,
    baseModel: null,
    checkpointStep: null,
    adapterSha256: null,
  },
  {
    configuration: 'codegrep-v3',
    instanceId: 'django__django-15278',
    resolved: true,
    outcome: 'resolved',
    rounds: 15,
    inputTokens: 301_200,
    outputTokens: 5_800,
    patchBytes: 512,
    endReason: 'submitted',
    error: null,
    servedModel: 'run-7/step-00000897',
    baseModel: '/models/Qwen3-4B',
    checkpointStep: 897,
    adapterSha256: 'ab'.repeat(32),
  },
  {
    configuration: 'bm25-top2',
    instanceId: 'astropy__astropy-12907',
    resolved: false,
    outcome: 'error',
    rounds: 0,
    inputTokens: 0,
    outputTokens: 0,
    patchBytes: 0,
    endReason: 'llm_error',
    error: 'agent: LLM endpoint refused the API key',
    servedModel: null,
    baseModel: null,
    checkpointStep: null,
    adapterSha256: null,
  },
];

describe('downstream schemas', () => {
  it('declares the run-row columns and names itself in the metadata', () => {
    expect(downstreamRunsArrowSchema.metadata.get('schemaName')).toBe(DOWNSTREAM_RUNS_SCHEMA_NAME);
    expect(downstreamRunsArrowSchema.metadata.get('schemaVersion')).toBe(String(DOWNSTREAM_RUNS_SCHEMA_VERSION));
    expect(downstreamRunsArrowSchema.fields.map((f) => [f.name, String(f.type), f.nullable])).toEqual([
      ['configuration', 'Utf8', false],
      ['instanceId', 'Utf8', false],
      ['resolved', 'Bool', false],
      ['outcome', 'Utf8', false],
      ['rounds', 'Int32', false],
      ['inputTokens', 'Float64', false],
      ['outputTokens', 'Float64', false],
      ['patchBytes', 'Float64', false],
      ['endReason', 'Utf8', false],
      ['error', 'Utf8', true],
      ['servedModel', 'Utf8', true],
      ['baseModel', 'Utf8', true],
      ['checkpointStep', 'Int32', true],
      ['adapterSha256', 'Utf8', true],
    ]);
    expect(Object.keys(DownstreamRunRowSchema.shape)).toEqual(downstreamRunsArrowSchema.fields.map((f) => f.name));
  });

  it('holds run rows through a Parquet artifact round trip', async () => {
    const dir = await fs.mkdtemp(path.join(tmpdir(), 'codegrep-downstream-schema-'));
    try {
      const uri = path.join(dir, 'runs.parquet');
      const ref = await writeParquetArtifact({
        path: uri,
        schemaName: DOWNSTREAM_RUNS_SCHEMA_NAME,
        schemaVersion: DOWNSTREAM_RUNS_SCHEMA_VERSION,
        arrowSchema: downstreamRunsArrowSchema,
        rows,
        inputs: [],
        configHash: 'e'.repeat(64),
      });
      expect(ref).toMatchObject({ rows: 3, schema: DOWNSTREAM_RUNS_SCHEMA_NAME, schemaVersion: 2 });
      expect((await readParquetTable(uri)).numRows).toBe(3);
      expect((await readParquetObjects(uri)).map((r) => DownstreamRunRowSchema.parse(r))).toEqual(rows);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('reads SWE-bench test lists as JSON strings or arrays, and names bad ones', () => {
    const base = { instance_id: 'x__y-1', repo: 'x/y', base_commit: 'b'.repeat(40), problem_statement: 'issue' };
    const parsed = DownstreamInstanceSchema.parse({
      ...base,
      FAIL_TO_PASS: '["tests/test_a.py::test_x", "test_b (app.tests.T)"]',
      PASS_TO_PASS: ['tests/test_a.py::test_y'],
      test_patch: '',
    });
    expect(parsed).toMatchObject({
      FAIL_TO_PASS: ['tests/test_a.py::test_x', 'test_b (app.tests.T)'],
      PASS_TO_PASS: ['tests/test_a.py::test_y'],
    });
    expect(parsed.test_patch).toBeUndefined();
    expect(DownstreamInstanceSchema.parse({ ...base, FAIL_TO_PASS: null })).toMatchObject({ FAIL_TO_PASS: [], PASS_TO_PASS: [] });
    const bad = DownstreamInstanceSchema.safeParse({ ...base, FAIL_TO_PASS: '[tests/test_a.py' });
    expect(bad.success).toBe(false);
    expect(bad.error!.issues[0]).toMatchObject({ path: ['FAIL_TO_PASS'], message: 'is a string but not a JSON list of test names' });
    expect(DownstreamInstanceSchema.safeParse({ ...base, PASS_TO_PASS: '[1, 2]' }).error!.issues[0]!.message).toMatch(
      /non-empty test-name strings/,
    );
    expect(DownstreamInstanceSchema.safeParse({ ...base, base_commit: 'abc' }).success).toBe(false);
  });

  it('checks configurations', () => {
    expect(InjectionConfigurationSchema.parse({ name: 'bm25-top2', source: 'predictions', k: 2 })).toEqual({
      name: 'bm25-top2',
      source: 'predictions',
      k: 2,
    });
    expect(InjectionConfigurationSchema.safeParse({ name: '', source: 'none' }).error!.issues[0]!.message).toMatch(/needs a name/);
    expect(InjectionConfigurationSchema.safeParse({ name: 'x', source: 'oracle', k: 0 }).error!.issues[0]!.message).toMatch(
      /k must be at least 1/,
    );
    expect(InjectionConfigurationSchema.safeParse({ name: 'x', source: 'bm25' }).success).toBe(false);
  });
});

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readParquetObjects, writeParquetArtifact } from '../lib/artifacts';
import {
  JUDGEMENT_SCHEMA_NAME,
  JUDGEMENT_SCHEMA_VERSION,
  JudgeCandidateSchema,
  judgementArrowSchema,
  JudgementSchema,
  keepsFile,
  type Judgement,
} from './judge';

const dir = await mkdtemp(path.join(tmpdir(), 'judge-schema-'));
afterAll(() => rm(dir, { recursive: true, force: true }));

const rows: Judgement[] = [
  {
    trajectoryId: 't1',
    instanceId: 'django__django-1',
    path: 'django/db/models/query.py',
    verdict: 'RELEVANT',
    reply: 'RELEVANT',
    attempts: 1,
    model: 'glm',
    latencyMs: 812.5,
  },
  {
    trajectoryId: 't1',
    instanceId: 'django__django-1',
    path: 'docs/x.py',
    verdict: 'DEFAULTED',
    reply: '',
    attempts: 6,
    model: 'glm',
    latencyMs: 60_000,
    error: 'LLM endpoint http://h/v1 failed 6 attempt(s)',
  },
  {
    trajectoryId: 't2',
    instanceId: 'sympy__sympy-2',
    path: 'sympy/core/expr.py',
    verdict: 'SKIPPED',
    reply: '',
    attempts: 0,
    model: null,
    latencyMs: 0,
  },
];

describe('judgement schema', () => {
  it('round-trips through the real zstd Parquet writer and reader with its explicit types', async () => {
    const ref = await writeParquetArtifact({
      path: path.join(dir, 'judgements.parquet'),
      schemaName: JUDGEMENT_SCHEMA_NAME,
      schemaVersion: JUDGEMENT_SCHEMA_VERSION,
      arrowSchema: judgementArrowSchema,
      rows,
      inputs: [],
      configHash: 'a'.repeat(64),
    });
    expect(ref).toMatchObject({ rows: 3, schema: 'catm.judgements', schemaVersion: 1 });
    const back = (await readParquetObjects(ref.uri)).map((row) => JudgementSchema.parse(row));
    expect(back.map((r) => ({ ...r, error: r.error ?? undefined }))).toEqual(rows);
    expect(back[0]?.error).toBeNull();
  });

  it('rejects a verdict outside the four, a reply over 500 characters and a negative attempt count', () => {
    const good = rows[0]!;
    expect(JudgementSchema.safeParse({ ...good, verdict: 'relevant' }).success).toBe(false);
    expect(JudgementSchema.safeParse({ ...good, reply: 'x'.repeat(501) }).success).toBe(false);
    expect(JudgementSchema.safeParse({ ...good, attempts: -1 }).success).toBe(false);
    expect(
      JudgeCandidateSchema.safeParse({
        trajectoryId: 't',
        instanceId: 'i',
        repo: 'o/r',
        path: '',
        problemStatement: '',
        postReasoning: '',
        postReasoningTokens: 0,
      }).success,
    ).toBe(false);
  });

  it('keeps every file except an explicit NOT_RELEVANT', () => {
    expect(['RELEVANT', 'NOT_RELEVANT', 'DEFAULTED', 'SKIPPED'].filter((v) => keepsFile(v as Judgement['verdict']))).toEqual([
      'RELEVANT',
      'DEFAULTED',
      'SKIPPED',
    ]);
  });
});

import * as arrow from 'apache-arrow';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RowRecord } from '../../schemas/rows';
import { hashConfig } from './config-hash';
import { InputFileError } from './input-file-error';
import { readParquetObjects, readParquetTable } from './read-parquet';
import { readRows } from './read-rows';
import { makeTempDir, sharedDataDir } from './test-helpers';
import { writeParquetArtifact } from './write-parquet';

let dir: string;
let cleanup: () => Promise<void>;
beforeEach(async () => ({ dir, cleanup } = await makeTempDir()));
afterEach(() => cleanup());

async function collect(path: string): Promise<RowRecord[]> {
  const out: RowRecord[] = [];
  for await (const record of readRows(path)) out.push(record);
  return out;
}

async function readError(promise: Promise<unknown>): Promise<InputFileError> {
  const error = await promise.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(InputFileError);
  return error as InputFileError;
}

describe('readRows on JSON Lines', () => {
  it('yields objects with line ordinals, skips blank lines and turns bad lines into error records', async () => {
    const path = join(dir, 'rows.jsonl');
    const lines = [
      '{"instance_id": "a", "resolved": 1}',
      '',
      '{"instance_id": "b", "trajectory": [{"role": "user", "content": "hi"}]}',
      '{"instance_id": "c", ',
      '[1, 2]',
      '   ',
      '42',
      'null',
      '{"instance_id": "d"}',
      '{"instance_id": "e", "trajectory": [{"role": "ass',
    ];
    await writeFile(path, lines.join('\n'));
    const records = await collect(path);
    expect(records).toEqual([
      { ordinal: 1, row: { instance_id: 'a', resolved: 1 } },
      { ordinal: 3, row: { instance_id: 'b', trajectory: [{ role: 'user', content: 'hi' }] } },
      { ordinal: 4, error: expect.stringMatching(/^malformed JSON: /) },
      { ordinal: 5, error: 'not a JSON object: the line holds an array' },
      { ordinal: 7, error: 'not a JSON object: the line holds a number' },
      { ordinal: 8, error: 'not a JSON object: the line holds null' },
      { ordinal: 9, row: { instance_id: 'd' } },
      { ordinal: 10, error: expect.stringMatching(/^malformed JSON: /) },
    ]);
    for (const record of records) if ('error' in record) expect(record.error.length).toBeLessThan(150);
  });

  it('reads .ndjson, CRLF line ends and a UTF-8 byte order mark', async () => {
    const path = join(dir, 'rows.NDJSON');
    await writeFile(path, '\uFEFF{"a": 1}\r\n{"a": "é"}\r\n');
    expect(await collect(path)).toEqual([
      { ordinal: 1, row: { a: 1 } },
      { ordinal: 2, row: { a: 'é' } },
    ]);
  });

  it('streams the real OpenHands trajectory sample: 48 objects with trajectory arrays', async () => {
    const records = await collect(join(sharedDataDir, 'openhands_trajectories.sample.jsonl'));
    expect(records).toHaveLength(48);
    records.forEach((record, i) => {
      expect(record.ordinal).toBe(i + 1);
      expect('row' in record).toBe(true);
      const row = (record as { row: Record<string, unknown> }).row;
      expect(Array.isArray(row.trajectory)).toBe(true);
      expect((row.trajectory as unknown[]).length).toBeGreaterThan(2);
      expect(row.instance_id).toMatch(/^[\w.-]+__[\w.-]+-\d+$/);
    });
  });
});

describe('readRows on Parquet', () => {
  it('streams rows of every row group as plain objects with 1-based row ordinals', async () => {
    const path = join(dir, 'traj.parquet');
    const message = new arrow.Struct([
      new arrow.Field('role', new arrow.Utf8(), false),
      new arrow.Field('content', new arrow.Utf8(), true),
    ]);
    const rows = Array.from({ length: 7 }, (_, i) => ({
      instance_id: `sympy__sympy-${20000 + i}`,
      resolved: BigInt(i % 2),
      trajectory: [
        { role: 'user', content: `issue ${i}` },
        { role: 'assistant', content: null },
      ],
    }));
    await writeParquetArtifact({
      path,
      schemaName: 'trajectories',
      schemaVersion: 1,
      inputs: [],
      configHash: hashConfig({}),
      rowGroupSize: 3,
      arrowSchema: new arrow.Schema([
        new arrow.Field('instance_id', new arrow.Utf8(), false),
        new arrow.Field('resolved', new arrow.Int64(), false),
        new arrow.Field('trajectory', new arrow.List(new arrow.Field('item', message, false)), false),
      ]),
      rows,
    });
    const expected = rows.map((row, i) => ({ ordinal: i + 1, row: { ...row, resolved: i % 2 } }));
    expect(await collect(path)).toEqual(expected);
    const table = await readParquetTable(path);
    expect(table.numRows).toBe(7);
    expect(await readParquetObjects(path)).toEqual(expected.map((e) => e.row));

    // A consumer that stops early releases the file; reading it again still works.
    for await (const record of readRows(path)) {
      expect(record.ordinal).toBe(1);
      break;
    }
    expect(await collect(path)).toHaveLength(7);
  });

  it('names a file whose extension says Parquet but whose bytes are not, or are cut short', async () => {
    const fake = join(dir, 'fake.parquet');
    await writeFile(fake, '{"instance_id": "a"}\n'.repeat(4));
    for (const attempt of [() => collect(fake), () => readParquetTable(fake), () => readParquetObjects(fake)]) {
      const error = await readError(attempt());
      expect(error.message).toContain(fake);
      expect(error.message).toMatch(/is not a Parquet file/);
    }

    const real = join(dir, 'real.parquet');
    await writeParquetArtifact({
      path: real,
      schemaName: 'x',
      schemaVersion: 1,
      inputs: [],
      configHash: hashConfig({}),
      arrowSchema: new arrow.Schema([new arrow.Field('x', new arrow.Utf8(), false)]),
      rows: [{ x: 'y' }],
    });
    const cut = join(dir, 'cut.parquet');
    const bytes = await readFile(real);
    await writeFile(cut, bytes.subarray(0, bytes.length - 10));
    expect((await readError(collect(cut))).message).toMatch(new RegExp(`${cut}.*not a Parquet file`));
  });
});

describe('readRows input errors', () => {
  it('says a missing file does not exist', async () => {
    const path = join(dir, 'nope.jsonl');
    const error = await readError(collect(path));
    expect(error.message).toBe(`Input file ${path} does not exist`);
    expect(error.path).toBe(path);
    expect((await readError(collect(join(dir, 'nope.parquet')))).message).toMatch(/does not exist/);
    expect((await readError(readParquetTable(join(dir, 'nope.parquet')))).message).toMatch(/does not exist/);
  });

  it('refuses a directory', async () => {
    const path = join(dir, 'shards.jsonl');
    await mkdir(path);
    expect((await readError(collect(path))).message).toBe(`Input path ${path} is a directory, not a file`);
  });

  it('refuses an unknown extension and lists the accepted ones', async () => {
    const path = join(dir, 'rows.csv');
    await writeFile(path, 'a,b\n1,2\n');
    expect((await readError(collect(path))).message).toBe(`Input file ${path} has extension .csv; accepted: .jsonl, .ndjson, .parquet`);
    const bare = join(dir, 'rows');
    await writeFile(bare, '{}\n');
    expect((await readError(collect(bare))).message).toMatch(/has no extension; accepted: \.jsonl, \.ndjson, \.parquet/);
  });
});

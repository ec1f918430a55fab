import * as arrow from 'apache-arrow';
import { createHash } from 'node:crypto';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hashConfig } from './config-hash';
import { manifestPathFor } from './manifest';
import { readParquetLayout, readParquetObjects, readParquetTable } from './read-parquet';
import { readRows } from './read-rows';
import { makeTempDir } from './test-helpers';
import { writeParquetArtifact } from './write-parquet';

const viewStruct = new arrow.Struct([
  new arrow.Field('path', new arrow.Utf8(), false),
  new arrow.Field('weight', new arrow.Float64(), true),
]);
const schema = new arrow.Schema([
  new arrow.Field('id', new arrow.Int32(), false),
  new arrow.Field('instance_id', new arrow.Utf8(), false),
  new arrow.Field('note', new arrow.Utf8(), true),
  new arrow.Field('score', new arrow.Float64(), true),
  new arrow.Field('resolved', new arrow.Bool(), true),
  new arrow.Field('tokens', new arrow.Int64(), true),
  new arrow.Field('files', new arrow.List(new arrow.Field('item', new arrow.Utf8(), true)), true),
  new arrow.Field('views', new arrow.List(new arrow.Field('item', viewStruct, true)), true),
]);

function makeRow(i: number): Record<string, unknown> {
  return {
    id: i,
    instance_id: `django__django-${11000 + i}`,
    note: i % 3 === 0 ? null : `note ${i} ✓`,
    score: i % 4 === 0 ? null : i / 7,
    resolved: i % 5 === 0 ? null : i % 2 === 0,
    tokens: i * 1_000_003,
    files: i % 6 === 0 ? null : Array.from({ length: i % 3 }, (_, k) => `pkg/mod_${k}.py`),
    views:
      i % 7 === 0
        ? []
        : [
            { path: `src/f${i}.py`, weight: i * 0.25 },
            { path: 'setup.py', weight: null },
          ],
  };
}

const provenance = { schemaName: 'test-rows', schemaVersion: 2, inputs: [], configHash: hashConfig({ test: 'write' }) };

let dir: string;
let cleanup: () => Promise<void>;
beforeEach(async () => ({ dir, cleanup } = await makeTempDir()));
afterEach(() => cleanup());

describe('writeParquetArtifact', () => {
  it('round-trips every column type through zstd Parquet in row groups of rowGroupSize', async () => {
    const rows = Array.from({ length: 25 }, (_, i) => makeRow(i));
    const path = join(dir, 'rows.parquet');
    const ref = await writeParquetArtifact({ ...provenance, path, arrowSchema: schema, rows, rowGroupSize: 10 });

    expect(ref).toEqual({
      uri: path,
      sha256: createHash('sha256')
        .update(await readFile(path))
        .digest('hex'),
      rows: 25,
      schema: 'test-rows',
      schemaVersion: 2,
    });
    expect(isAbsolute(ref.uri)).toBe(true);
    expect(await readParquetLayout(path)).toEqual({ rows: 25, rowGroups: [10, 10, 5], compressions: ['ZSTD'] });
    expect(await readParquetObjects(path)).toEqual(rows);

    const streamed = [];
    for await (const record of readRows(path)) streamed.push(record);
    expect(streamed).toEqual(rows.map((row, i) => ({ ordinal: i + 1, row })));

    const table = await readParquetTable(path);
    expect(table.schema.fields.map((f) => [f.name, String(f.type), f.nullable])).toEqual(
      schema.fields.map((f) => [f.name, String(f.type), f.nullable]),
    );
    expect(table.schema.metadata.get('codegrep.schema')).toBe('test-rows');
    expect(table.schema.metadata.get('codegrep.schemaVersion')).toBe('2');
  });

  it('accepts an async iterable and uses row groups of 10 000 rows by default', async () => {
    async function* ids() {
      for (let i = 0; i < 10_001; i++) yield { id: i };
    }
    const path = join(dir, 'ids.parquet');
    const ref = await writeParquetArtifact({
      ...provenance,
      path,
      arrowSchema: new arrow.Schema([new arrow.Field('id', new arrow.Int32(), false)]),
      rows: ids(),
    });
    expect(ref.rows).toBe(10_001);
    expect(await readParquetLayout(path)).toEqual({ rows: 10_001, rowGroups: [10_000, 1], compressions: ['ZSTD'] });
    const table = await readParquetTable(path);
    expect(table.getChild('id')!.get(10_000)).toBe(10_000);
  });

  it('writes a valid file with the schema and no row groups for zero rows', async () => {
    const path = join(dir, 'empty.parquet');
    const ref = await writeParquetArtifact({ ...provenance, path, arrowSchema: schema, rows: [] });
    expect(ref.rows).toBe(0);
    const table = await readParquetTable(path);
    expect(table.numRows).toBe(0);
    expect(table.schema.fields.map((f) => f.name)).toEqual(schema.fields.map((f) => f.name));
    expect(await readParquetLayout(path)).toEqual({ rows: 0, rowGroups: [], compressions: [] });
    const streamed = [];
    for await (const record of readRows(path)) streamed.push(record);
    expect(streamed).toEqual([]);
  });

  it('leaves no file, temp file or manifest when the rows iterator throws midway', async () => {
    function* failing() {
      for (let i = 0; i < 25; i++) {
        if (i === 15) throw new Error('source died at row 15');
        yield makeRow(i);
      }
    }
    const path = join(dir, 'partial.parquet');
    await expect(writeParquetArtifact({ ...provenance, path, arrowSchema: schema, rows: failing(), rowGroupSize: 10 })).rejects.toThrow(
      'source died at row 15',
    );
    expect(await readdir(dir)).toEqual([]);
  });

  it('keeps an earlier artifact and its manifest intact when a rewrite fails', async () => {
    const path = join(dir, 'kept.parquet');
    await writeParquetArtifact({ ...provenance, path, arrowSchema: schema, rows: [makeRow(1), makeRow(2)] });
    const before = await readFile(path);
    const manifestBefore = await readFile(manifestPathFor(path), 'utf8');
    async function* failing() {
      yield makeRow(3);
      throw new Error('judge endpoint went away');
    }
    await expect(writeParquetArtifact({ ...provenance, path, arrowSchema: schema, rows: failing() })).rejects.toThrow(
      'judge endpoint went away',
    );
    expect(await readFile(path)).toEqual(before);
    expect(await readFile(manifestPathFor(path), 'utf8')).toBe(manifestBefore);
    expect((await readdir(dir)).sort()).toEqual(['kept.parquet', 'kept.parquet.manifest.json']);
  });

  it('rejects a value of the wrong type naming the row and column, and writes nothing', async () => {
    const rows = [makeRow(1), { ...makeRow(2), views: [{ path: 'a.py', weight: 'heavy' }] }];
    const path = join(dir, 'bad.parquet');
    await expect(writeParquetArtifact({ ...provenance, path, arrowSchema: schema, rows })).rejects.toThrow(
      /bad\.parquet: row 2, column views\[0\]\.weight: expected a number, got string "heavy"/,
    );
    expect(await readdir(dir)).toEqual([]);
  });

  it('rejects nulls in non-nullable columns, unknown columns, out-of-range integers and bad provenance', async () => {
    const path = join(dir, 'bad.parquet');
    const write = (rows: Record<string, unknown>[], extra: object = {}) =>
      writeParquetArtifact({ ...provenance, path, arrowSchema: schema, rows, ...extra });
    await expect(write([{ ...makeRow(1), instance_id: null }])).rejects.toThrow(/row 1, column instance_id: is not nullable but is null/);
    await expect(write([{ ...makeRow(1), instanceId: 'x' }])).rejects.toThrow(/row 1, column instanceId: is not a column of the schema/);
    await expect(write([{ ...makeRow(1), id: 2 ** 31 }])).rejects.toThrow(/column id: 2147483648 is out of range for Int32/);
    await expect(write([{ ...makeRow(1), id: 1.5 }])).rejects.toThrow(/column id: expected an integer, got number 1.5/);
    await expect(write([makeRow(1)], { configHash: 'not-a-hash' })).rejects.toThrow(
      /Invalid provenance for artifact .*bad\.parquet: configHash/,
    );
    await expect(write([makeRow(1)], { rowGroupSize: 0 })).rejects.toThrow(/rowGroupSize must be a positive integer/);
    expect(await readdir(dir)).toEqual([]);
  });

  it('refuses a schema type it cannot fill from rows before reading any row', async () => {
    let pulled = 0;
    function* rows() {
      pulled++;
      yield { at: 1 };
    }
    const arrowSchema = new arrow.Schema([new arrow.Field('at', new arrow.TimestampMillisecond(), false)]);
    await expect(writeParquetArtifact({ ...provenance, path: join(dir, 'ts.parquet'), arrowSchema, rows: rows() })).rejects.toThrow(
      /column at has Arrow type Timestamp/,
    );
    expect(pulled).toBe(0);
  });

  it('writes bytes that other readers of the same path never see half-done (temp name differs)', async () => {
    const path = join(dir, 'big.parquet');
    const names = new Set<string>();
    async function* rows() {
      for (let i = 0; i < 30; i++) {
        if (i % 10 === 0) for (const name of await readdir(dir)) names.add(name);
        yield makeRow(i);
      }
    }
    await writeFile(path, 'previous content');
    await writeParquetArtifact({ ...provenance, path, arrowSchema: schema, rows: rows(), rowGroupSize: 10 });
    const tempNames = [...names].filter((n) => n !== 'big.parquet');
    expect(tempNames.length).toBeGreaterThan(0);
    for (const name of tempNames) expect(name).toMatch(new RegExp(`^big\\.parquet\\.tmp-${process.pid}-[0-9a-f]{8}$`));
    expect((await readdir(dir)).sort()).toEqual(['big.parquet', 'big.parquet.manifest.json']);
  });
});

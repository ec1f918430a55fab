import * as arrow from 'apache-arrow';
import { describe, expect, it } from 'vitest';
import { rowsToRecordBatch } from './rows-to-arrow';

const list = (type: arrow.DataType) => new arrow.List(new arrow.Field('item', type, false));

describe('rowsToRecordBatch: integer lists given as typed arrays', () => {
  it('takes a typed array of the items own type as the plain array of its values', () => {
    const schema = new arrow.Schema([new arrow.Field('counts', list(new arrow.Int32()), false)]);
    const typed = rowsToRecordBatch(schema, [{ counts: Int32Array.from([3, -1, 2 ** 31 - 1]) }, { counts: new Int32Array(0) }]);
    const plain = rowsToRecordBatch(schema, [{ counts: [3, -1, 2 ** 31 - 1] }, { counts: [] }]);
    expect(typed.toArray().map((r) => Array.from(r.counts as arrow.Vector))).toEqual([[3, -1, 2 ** 31 - 1], []]);
    expect(plain.toArray().map((r) => Array.from(r.counts as arrow.Vector))).toEqual([[3, -1, 2 ** 31 - 1], []]);
  });

  it('still rejects a typed array of another integer type or width', () => {
    const schema = new arrow.Schema([new arrow.Field('counts', list(new arrow.Int16()), false)]);
    expect(() => rowsToRecordBatch(schema, [{ counts: Int32Array.from([1]) }])).toThrow(/row 1, column counts: expected an array/);
    const unsigned = new arrow.Schema([new arrow.Field('counts', list(new arrow.Uint32()), false)]);
    expect(() => rowsToRecordBatch(unsigned, [{ counts: Int32Array.from([-1]) }])).toThrow(/expected an array/);
  });
});

import * as arrow from 'apache-arrow';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { bool, columns, float64, int32, list, nullable, nullish, struct, utf8 } from './columns';

describe('column lists', () => {
  const row = columns({
    path: utf8(z.string().min(1)),
    tokens: int32(),
    weight: float64(),
    kept: bool(),
    tags: list(utf8()),
    ranges: nullable(list(struct({ start: int32(), end: int32() }))),
    error: nullable(utf8()),
  });

  it('derive the Arrow schema: names, types and nullability in column order, list items non-null', () => {
    const schema = row.arrowSchema({ schemaName: 'demo', schemaVersion: '1' });
    expect(schema.fields.map((f) => `${f.name}:${f.type}:${f.nullable}`)).toEqual([
      'path:Utf8:false',
      'tokens:Int32:false',
      'weight:Float64:false',
      'kept:Bool:false',
      'tags:List<Utf8>:false',
      'ranges:List<Struct<{start:Int32, end:Int32}>>:true',
      'error:Utf8:true',
    ]);
    expect((schema.fields[4]!.type as arrow.List).children[0]!.nullable).toBe(false);
    expect([...schema.metadata]).toEqual([
      ['schemaName', 'demo'],
      ['schemaVersion', '1'],
    ]);
  });

  it('derive the zod row schema, with the stricter schemas given per column', () => {
    const good = { path: 'a.py', tokens: 3, weight: 0.5, kept: true, tags: [], ranges: null, error: null };
    expect(row.zod.parse(good)).toEqual(good);
    expect(row.zod.safeParse({ ...good, path: '' }).success).toBe(false);
    expect(row.zod.safeParse({ ...good, tokens: 1.5 }).success).toBe(false);
    expect(row.zod.safeParse({ ...good, ranges: [{ start: 1, end: 2 }] }).success).toBe(true);
    expect(row.zod.safeParse({ ...good, error: undefined }).success).toBe(false);
  });

  it('nullish: a nullable Arrow field whose zod key may also be absent or undefined', () => {
    const withNote = columns({ path: utf8(), note: nullish(utf8(z.string().min(1))) });
    expect(withNote.fields().map((f) => `${f.name}:${f.type}:${f.nullable}`)).toEqual(['path:Utf8:false', 'note:Utf8:true']);
    for (const note of ['x', null, undefined]) expect(withNote.zod.safeParse({ path: 'a.py', note }).success).toBe(true);
    expect(withNote.zod.parse({ path: 'a.py' })).toEqual({ path: 'a.py' });
    expect(withNote.zod.safeParse({ path: 'a.py', note: '' }).success).toBe(false);
  });
});

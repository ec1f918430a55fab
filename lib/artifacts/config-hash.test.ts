import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { canonicalJson, hashConfig } from './config-hash';

describe('hashConfig', () => {
  it('does not depend on key order at any depth', () => {
    const a = { model: 'qwen3', judge: { concurrency: 16, timeoutMs: 60_000 }, recipe: ['v1', 'v2'] };
    const b = { recipe: ['v1', 'v2'], judge: { timeoutMs: 60_000, concurrency: 16 }, model: 'qwen3' };
    expect(hashConfig(a)).toBe(hashConfig(b));
    expect(canonicalJson(b)).toBe('{"judge":{"concurrency":16,"timeoutMs":60000},"model":"qwen3","recipe":["v1","v2"]}');
  });

  it('is the sha256 hex of the canonical JSON', () => {
    const value = { b: 1, a: [true, null, 'x'] };
    expect(hashConfig(value)).toBe(createHash('sha256').update('{"a":[true,null,"x"],"b":1}').digest('hex'));
    expect(hashConfig(value)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('drops undefined members, so an absent option and an undefined one hash alike', () => {
    expect(hashConfig({ a: 1, b: undefined, nested: { c: undefined, d: 2 } })).toBe(hashConfig({ nested: { d: 2 }, a: 1 }));
  });

  it('changes when a value, an array order or a type changes', () => {
    const base = hashConfig({ beta: 0.5, files: ['a.py', 'b.py'] });
    expect(hashConfig({ beta: 0.25, files: ['a.py', 'b.py'] })).not.toBe(base);
    expect(hashConfig({ beta: 0.5, files: ['b.py', 'a.py'] })).not.toBe(base);
    expect(hashConfig({ beta: '0.5', files: ['a.py', 'b.py'] })).not.toBe(base);
    expect(hashConfig({ beta: 0.5, files: ['a.py', 'b.py'], extra: null })).not.toBe(base);
  });

  it('uses toJSON (dates) and refuses values JSON cannot represent faithfully', () => {
    expect(canonicalJson({ at: new Date('2025-03-01T00:00:00Z') })).toBe('{"at":"2025-03-01T00:00:00.000Z"}');
    expect(() => hashConfig({ steps: 10n })).toThrow(/\$\.steps is a bigint/);
    expect(() => hashConfig({ lr: Number.NaN })).toThrow(/\$\.lr is NaN/);
    expect(() => hashConfig({ seen: new Map() })).toThrow(/\$\.seen is a Map/);
  });
});

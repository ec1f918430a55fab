import { describe, expect, it } from 'vitest';
import { TermTable, termHash, unitsToString } from './term-table';
import { scanTokens, tokenize } from './tokenizer';

const units = (s: string): Uint16Array => Uint16Array.from(s, (c) => c.charCodeAt(0));

describe('TermTable', () => {
  it('gives dense ids in first-insertion order and finds terms by text', () => {
    const table = new TermTable();
    expect(table.intern(units('beta'), 0, 4, termHash('beta'))).toBe(0);
    expect(table.intern(units('alpha'), 0, 5, termHash('alpha'))).toBe(1);
    expect(table.intern(units('xbeta'), 1, 4, termHash('beta'))).toBe(0); // offset into a larger buffer
    expect(table.size).toBe(2);
    expect(table.get('alpha')).toBe(1);
    expect(table.get('gamma')).toBeUndefined();
    expect(table.term(0)).toBe('beta');
    expect(() => table.term(2)).toThrow(/no term with id 2/);
  });

  it('tells apart different terms whose hashes collide', () => {
    const table = new TermTable();
    expect(table.intern(units('ab'), 0, 2, 42)).toBe(0);
    expect(table.intern(units('cd'), 0, 2, 42)).toBe(1);
    expect(table.intern(units('cd'), 0, 2, 42)).toBe(1);
    expect(table.lookup(units('ab'), 0, 2, 42)).toBe(0);
    expect(table.lookup(units('ef'), 0, 2, 42)).toBe(-1);
  });

  it('keeps every term through growth of slots, spans and pool', () => {
    const table = new TermTable();
    const terms = Array.from({ length: 20_000 }, (_, i) => `term_${i.toString(36)}_${'z'.repeat(i % 7)}`);
    const ids = terms.map((t) => table.intern(units(t), 0, t.length, termHash(t)));
    expect(ids.every((id, i) => id === i)).toBe(true);
    expect(table.size).toBe(terms.length);
    expect(terms.every((t, i) => table.intern(units(t), 0, t.length, termHash(t)) === i)).toBe(true);
    for (let i = 0; i < terms.length; i += 397) {
      expect(table.get(terms[i]!)).toBe(i);
      expect(table.term(i)).toBe(terms[i]);
    }
  });

  it('stores terms longer than any buffer chunk', () => {
    const long = 'q'.repeat(100_000) + 'end';
    const table = new TermTable();
    const id = table.intern(units(long), 0, long.length, termHash(long));
    expect(table.term(id)).toBe(long);
    expect(unitsToString(units(long), 99_990, long.length)).toBe('qqqqqqqqqqend');
  });
});

describe('tokenizer scanner', () => {
  it('grows its buffer for very long words and hashes like termHash', () => {
    const word = 'Ab-'.repeat(5000);
    const [token] = tokenize(`x ${word} y`);
    expect(token).toBe('ab'.repeat(5000));
    const hashes: number[] = [];
    scanTokens(`${word} Other_Word`, (_u, _l, hash) => hashes.push(hash));
    expect(hashes).toEqual([termHash('ab'.repeat(5000)), termHash('other_word')]);
  });
});

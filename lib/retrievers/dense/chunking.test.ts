import { describe, expect, it } from 'vitest';
import { chunkSpans } from './chunking';

describe('chunkSpans', () => {
  it('keeps a file that fits in one window whole, an empty one as one empty chunk', () => {
    expect(chunkSpans(10, 10, 2)).toEqual([{ start: 0, end: 10 }]);
    expect(chunkSpans(0, 10, 2)).toEqual([{ start: 0, end: 0 }]);
  });

  it('cuts a long file into windows that overlap by `overlap` tokens and end exactly at its last token', () => {
    expect(chunkSpans(25, 10, 2)).toEqual([
      { start: 0, end: 10 },
      { start: 8, end: 18 },
      { start: 16, end: 25 },
    ]);
    expect(chunkSpans(26, 10, 2).at(-1)).toEqual({ start: 16, end: 26 });
    expect(chunkSpans(27, 10, 2).at(-1)).toEqual({ start: 24, end: 27 });
  });

  it('covers every token, with no window over the limit, for many lengths', () => {
    for (const [window, overlap] of [
      [7, 0],
      [7, 3],
      [30, 3],
    ] as const) {
      for (let n = 1; n <= 100; n++) {
        const spans = chunkSpans(n, window, overlap);
        expect(spans[0]!.start).toBe(0);
        expect(spans.at(-1)!.end).toBe(n);
        for (const s of spans) expect(s.end - s.start).toBeLessThanOrEqual(window);
        for (let i = 1; i < spans.length; i++) expect(spans[i - 1]!.end - spans[i]!.start).toBe(overlap);
      }
    }
  });

  it('rejects an overlap that would never advance and bad sizes', () => {
    expect(() => chunkSpans(20, 10, 10)).toThrow(/overlap must be an integer in \[0, window\)/);
    expect(() => chunkSpans(20, 0, 0)).toThrow(/window must be an integer >= 1/);
    expect(() => chunkSpans(-1, 10, 0)).toThrow(/tokenCount/);
  });
});

import { describe, expect, it } from 'vitest';
import { l2NormalizeInPlace, poolTokenEmbeddings, type TokenEmbeddings } from './pooling';

// Two sequences of width 3, hidden 2; the second has one padding position whose values must never count.
const tokens: TokenEmbeddings = {
  data: Float32Array.from([
    1,
    2,
    /**/ 3,
    4,
    /**/ 5,
    -6, // sequence 0: three real tokens
    -1,
    0,
    /**/ 7,
    8,
    /**/ 100,
    100, // sequence 1: two real tokens, then padding
  ]),
  batch: 2,
  sequence: 3,
  hidden: 2,
  mask: Uint8Array.from([1, 1, 1, 1, 1, 0]),
};

const plain = (vs: Float32Array[]): number[][] => vs.map((v) => Array.from(v));

describe('poolTokenEmbeddings', () => {
  it('mean pools over unmasked tokens only', () => {
    expect(plain(poolTokenEmbeddings(tokens, ['mean']))).toEqual([
      [3, 0],
      [3, 4],
    ]);
  });

  it('cls takes the first token, lasttoken the last unmasked one', () => {
    expect(plain(poolTokenEmbeddings(tokens, ['cls']))).toEqual([
      [1, 2],
      [-1, 0],
    ]);
    expect(plain(poolTokenEmbeddings(tokens, ['lasttoken']))).toEqual([
      [5, -6],
      [7, 8],
    ]);
  });

  it('max ignores padding even when the padding is larger', () => {
    expect(plain(poolTokenEmbeddings(tokens, ['max']))).toEqual([
      [5, 4],
      [7, 8],
    ]);
  });

  it('mean_sqrt_len divides the sum by sqrt(count)', () => {
    const [first] = poolTokenEmbeddings(tokens, ['mean_sqrt_len']);
    expect(first![0]).toBeCloseTo(9 / Math.sqrt(3), 6);
    expect(first![1]).toBeCloseTo(0, 6);
  });

  it('concatenates several modes in sentence-transformers order (cls, max, mean), whatever order they are given in', () => {
    expect(plain(poolTokenEmbeddings(tokens, ['mean', 'cls', 'max']))[1]).toEqual([-1, 0, 7, 8, 3, 4]);
  });

  it('rejects a sequence with no unmasked token, a wrong shape and no mode', () => {
    expect(() => poolTokenEmbeddings({ ...tokens, mask: Uint8Array.from([1, 1, 1, 0, 0, 0]) }, ['mean'])).toThrow(
      /sequence 1 .*no unmasked token/,
    );
    expect(() => poolTokenEmbeddings({ ...tokens, hidden: 3 }, ['mean'])).toThrow(/do not make a \[2, 3, 3\] tensor/);
    expect(() => poolTokenEmbeddings(tokens, [])).toThrow(/no pooling mode/);
  });
});

describe('l2NormalizeInPlace', () => {
  it('scales to unit length and leaves the zero vector at zero', () => {
    expect(Array.from(l2NormalizeInPlace(Float32Array.from([3, 4])))).toEqual([Math.fround(0.6), Math.fround(0.8)]);
    expect(Array.from(l2NormalizeInPlace(new Float32Array(3)))).toEqual([0, 0, 0]);
  });
});

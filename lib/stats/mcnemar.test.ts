import { describe, expect, it } from 'vitest';
import { binomialLowerTailHalf, mcnemarExact } from './mcnemar';

/** The exact p-value with integer arithmetic: 2·Σ_{i≤min(b,c)} C(n, i) / 2^n, capped at 1. */
function exactReference(b: number, c: number): number {
  const n = BigInt(b + c);
  let choose = 1n;
  let sum = 0n;
  for (let i = 0n; i <= BigInt(Math.min(b, c)); i++) {
    if (i > 0n) choose = (choose * (n - i + 1n)) / i;
    sum += choose;
  }
  // Scale to 60 bits of precision before converting, so huge n keeps its digits.
  const scale = 2n ** 60n;
  const ratio = Number((2n * sum * scale) / 2n ** n) / Number(scale);
  return Math.min(1, ratio);
}

/** Same as exactReference but as a float far below 1 (for p-values too small to compare absolutely). */
function exactReferenceRatio(b: number, c: number): number {
  const n = BigInt(b + c);
  let choose = 1n;
  let sum = 0n;
  for (let i = 0n; i <= BigInt(Math.min(b, c)); i++) {
    if (i > 0n) choose = (choose * (n - i + 1n)) / i;
    sum += choose;
  }
  // log2 of 2·sum / 2^n, from the bit length of sum and its leading 53 bits.
  const bits = sum.toString(2).length;
  const shift = BigInt(Math.max(0, bits - 53));
  return Number(sum >> shift) * 2 ** (Number(shift) + 1 - (b + c));
}

describe('McNemar exact test', () => {
  it('matches hand-computed values', () => {
    // 2·(C(7,0) + C(7,1)) / 2^7 = 2·8/128
    expect(mcnemarExact(1, 6)).toEqual({ b: 1, c: 6, discordant: 7, pValue: 0.125 });
    expect(mcnemarExact(6, 1).pValue).toBe(0.125);
    // No discordant pair: no evidence either way.
    expect(mcnemarExact(0, 0).pValue).toBe(1);
    // 2·C(5,0)/2^5
    expect(mcnemarExact(0, 5).pValue).toBe(0.0625);
    // 2·(1 + 4 + 6)/16 = 1.375 → capped at 1
    expect(mcnemarExact(2, 2).pValue).toBe(1);
    // 2·(1 + 10 + 45)/2^10 = 112/1024
    expect(mcnemarExact(2, 8).pValue).toBeCloseTo(0.109375, 15);
  });

  it('agrees with exact integer arithmetic up to thousands of discordant pairs', () => {
    for (const [b, c] of [
      [3, 17],
      [40, 60],
      [96, 129],
      [250, 310],
      [1000, 1100],
      [1500, 1500],
    ] as const) {
      expect(mcnemarExact(b, c).pValue).toBeCloseTo(exactReference(b, c), 12);
    }
    // Tiny p-values do not underflow to 0 (2·2^-2000 underflows doubles, so 0 is right there; 2^-1000 is not).
    expect(mcnemarExact(0, 1000).pValue / (2 * 2 ** -1000)).toBeCloseTo(1, 10);
    expect(mcnemarExact(3, 900).pValue / exactReferenceRatio(3, 900)).toBeCloseTo(1, 10);
  });

  it('refuses counts that are not non-negative integers', () => {
    expect(() => mcnemarExact(-1, 2)).toThrow(/b must be a non-negative integer/);
    expect(() => mcnemarExact(1, 2.5)).toThrow(/c must be a non-negative integer/);
    expect(binomialLowerTailHalf(4, -1)).toBe(0);
    expect(binomialLowerTailHalf(4, 4)).toBe(1);
    expect(binomialLowerTailHalf(4, 1)).toBe(5 / 16);
  });
});

import { describe, expect, it } from 'vitest';
import { PAPER_LIMITS } from './limits';
import { cutChars, fitOutput, sanitizeText } from './output';

describe('fitOutput (paper: tool outputs cut to 4096 characters)', () => {
  it('keeps an output of exactly 4096 characters whole', () => {
    const body = 'a'.repeat(PAPER_LIMITS.maxOutputChars);
    expect(fitOutput(body)).toEqual({ output: body, cut: false });
  });

  it('cuts 4097 characters to at most 4096 with a marker', () => {
    const body = 'a'.repeat(4097);
    const fitted = fitOutput(body);
    expect(fitted.cut).toBe(true);
    expect(fitted.output.length).toBeLessThanOrEqual(4096);
    expect(fitted.output.endsWith(`[output cut: first ${fitted.output.indexOf('\n')} of 4097 characters shown]`)).toBe(true);
    expect(fitted.cutNote).toBe(fitted.output.slice(fitted.output.indexOf('\n') + 1));
  });

  it('cuts at a line break and keeps trailing notes whole', () => {
    const body = Array.from({ length: 1000 }, (_, k) => `line ${k}`).join('\n');
    const fitted = fitOutput(body, ['[note that must survive]']);
    const lines = fitted.output.split('\n');
    expect(fitted.output.length).toBeLessThanOrEqual(4096);
    expect(lines.at(-1)).toBe('[note that must survive]');
    expect(lines.at(-3)).toMatch(/^line \d+$/); // the last body line is whole
  });

  it('never splits a surrogate pair', () => {
    expect(cutChars('a😀', 2)).toBe('a');
    expect(cutChars('😀😀', 3)).toBe('😀');
  });
});

describe('sanitizeText', () => {
  it('stops at the first NUL and neutralises control characters', () => {
    expect(sanitizeText('ok\r\nnext\x1b[31mred\u0007\tend\0garbage')).toEqual({
      text: 'ok\nnext\uFFFD[31mred\uFFFD\tend',
      binaryCut: true,
    });
    expect(sanitizeText('plain')).toEqual({ text: 'plain', binaryCut: false });
  });

  it('neutralises C1 controls (a one-character CSI), bidi overrides and zero-width characters', () => {
    expect(sanitizeText('\u009b31mred \u202eevil\u202c a\u200bb \ufeffx\u00ad').text).toBe(
      '\uFFFD31mred \uFFFDevil\uFFFD a\uFFFDb \uFFFDx\uFFFD',
    );
    expect(sanitizeText('é — 😀 日本').text).toBe('é — 😀 日本');
  });
});

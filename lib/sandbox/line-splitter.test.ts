import { describe, expect, it } from 'vitest';
import { LineSplitter } from './line-splitter';

function collect(chunks: string[], maxLineBytes = 100, stopAfter = Infinity, separator = 0x0a) {
  const lines: Array<[string, number]> = [];
  const splitter = new LineSplitter(
    maxLineBytes,
    (line, full) => {
      lines.push([line.toString('utf8'), full]);
      return lines.length >= stopAfter ? 'enough' : 'more';
    },
    separator,
  );
  for (const chunk of chunks) if (splitter.push(Buffer.from(chunk)) === 'enough') break;
  if (!splitter.done) splitter.end();
  return lines;
}

describe('LineSplitter', () => {
  it('joins lines split across chunks and emits a last line without separator', () => {
    expect(collect(['ab', 'c\nde', 'f\n', 'g'])).toEqual([
      ['abc', 3],
      ['def', 3],
      ['g', 1],
    ]);
  });

  it('keeps only maxLineBytes of a long line but reports its full length', () => {
    expect(collect(['0123456789', '0123456789\nshort\n'], 4)).toEqual([
      ['0123', 20],
      ['shor', 5],
    ]);
    expect(collect(['0123456789\n'], 4)).toEqual([['0123', 10]]);
  });

  it('stops when the consumer has enough', () => {
    expect(collect(['a\nb\nc\nd\n'], 100, 2)).toEqual([
      ['a', 1],
      ['b', 1],
    ]);
  });

  it('says where in the chunk it stopped, so the caller can take over the rest', () => {
    const splitter = new LineSplitter(100, (line) => (line.toString() === 'b' ? 'enough' : 'more'));
    const chunk = Buffer.from('a\nb\nc\nd');
    expect(splitter.push(chunk)).toBe('enough');
    expect(chunk.subarray(splitter.stoppedAt).toString()).toBe('c\nd');
    const spanning = new LineSplitter(100, () => 'enough');
    spanning.push(Buffer.from('par'));
    expect(spanning.push(Buffer.from('tial\nrest'))).toBe('enough');
    expect(spanning.stoppedAt).toBe(5);
  });

  it('splits on another separator (NUL for --null listings), empty records included', () => {
    expect(collect(['x\0\0y\0'], 100, Infinity, 0x00)).toEqual([
      ['x', 1],
      ['', 0],
      ['y', 1],
    ]);
  });

  it('hands out lines that survive the chunk being reused', () => {
    const seen: string[] = [];
    const buffer = Buffer.from('one\ntw');
    const splitter = new LineSplitter(100, (line) => (seen.push(line.toString()), 'more'));
    splitter.push(buffer);
    buffer.write('XXXXXX'); // the stream reuses its buffer
    splitter.push(Buffer.from('o\n'));
    expect(seen).toEqual(['one', 'two']);
  });
});

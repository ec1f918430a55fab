import { describe, expect, it } from 'vitest';
import { findAnswerBlock, parseCodeGrepAnswer } from './answer-codegrep';
import { parseLocalizationFinish } from './answer-codescout';

const ROOT = '/worktrees/astropy__astropy-12907';

describe('findAnswerBlock', () => {
  it('finds none, the last complete block, or an unterminated one', () => {
    expect(findAnswerBlock('no answer here')).toEqual({ kind: 'none' });
    expect(findAnswerBlock('<answer>1</answer> then <answer>2</answer>')).toEqual({ kind: 'complete', body: '2' });
    expect(findAnswerBlock('<answer>1</answer> then <answer>2')).toEqual({ kind: 'complete', body: '1' });
    expect(findAnswerBlock('text <answer>{"files": [')).toEqual({ kind: 'unterminated', body: '{"files": [' });
  });
});

describe('parseCodeGrepAnswer', () => {
  it('accepts the paper schema, with or without line_ranges', () => {
    expect(parseCodeGrepAnswer('{"files": ["a/b.py"], "line_ranges": []}', ROOT)).toEqual({
      ok: true,
      answer: { files: ['a/b.py'], lineRanges: [] },
    });
    expect(parseCodeGrepAnswer('{"files": ["a/b.py"]}', ROOT)).toEqual({ ok: true, answer: { files: ['a/b.py'], lineRanges: [] } });
    expect(parseCodeGrepAnswer('{"files": [], "line_ranges": null, "confidence": 0.9}', ROOT)).toEqual({
      ok: true,
      answer: { files: [], lineRanges: [] },
    });
  });

  it('reads the three line-range spellings into {path, start, end}', () => {
    const body = JSON.stringify({
      files: ['a.py'],
      line_ranges: [{ file: 'a.py', start: 3, end: 9 }, { path: 'b.py', start: 4, end: 4 }, 'c/d.py:10-20', 'e.py:7', 'f.py: 1 - 2'],
    });
    expect(parseCodeGrepAnswer(body, ROOT)).toEqual({
      ok: true,
      answer: {
        files: ['a.py'],
        lineRanges: [
          { path: 'a.py', start: 3, end: 9 },
          { path: 'b.py', start: 4, end: 4 },
          { path: 'c/d.py', start: 10, end: 20 },
          { path: 'e.py', start: 7, end: 7 },
          { path: 'f.py', start: 1, end: 2 },
        ],
      },
    });
  });

  it('normalises paths: the worktree prefix, ./ and backslashes go', () => {
    const body = JSON.stringify({
      files: [`${ROOT}/astropy/modeling/core.py`, '.\\astropy\\io\\fits.py'],
      line_ranges: [`${ROOT}/x.py:1-2`],
    });
    expect(parseCodeGrepAnswer(body, ROOT)).toEqual({
      ok: true,
      answer: { files: ['astropy/modeling/core.py', 'astropy/io/fits.py'], lineRanges: [{ path: 'x.py', start: 1, end: 2 }] },
    });
  });

  it('removes a ```json fence around the JSON', () => {
    expect(parseCodeGrepAnswer('\n```json\n{"files": ["a.py"]}\n```\n', ROOT)).toMatchObject({ ok: true, answer: { files: ['a.py'] } });
  });

  it('rejects answers outside the schema with a message naming the field', () => {
    const error = (body: string) => {
      const parsed = parseCodeGrepAnswer(body, ROOT);
      expect(parsed.ok).toBe(false);
      return parsed.ok ? '' : parsed.error;
    };
    expect(error('')).toMatch(/the <answer> block is empty/);
    expect(error('["a.py"]')).toMatch(/\(root\): the answer must be a JSON object/);
    expect(error('{"files": "a.py"}')).toMatch(/files: files must be a list/);
    expect(error('{"files": [3]}')).toMatch(/files\[0\]: /);
    expect(error('{"files": ["  "]}')).toMatch(/files\[0\]: must be a non-empty path/);
    expect(error('{"files": ["./"]}')).toMatch(/files\[0\]: "\.\/" is not a file path/);
    expect(error('{"files": ["a.py"], "line_ranges": "a.py:1-2"}')).toMatch(/line_ranges: line_ranges must be a list/);
    expect(error('{"files": ["a.py"], "line_ranges": [{"file": "a.py", "start": 0, "end": 2}]}')).toMatch(/line_ranges\[0\]/);
    expect(error('{"files": ["a.py"], "line_ranges": [{"file": "a.py", "start": 5, "end": 2}]}')).toMatch(
      /line_ranges\[0\]: end must be >= start/,
    );
    expect(error('{"files": ["a.py"], "line_ranges": ["a.py:5-2"]}')).toMatch(/line_ranges\[0\]: end must be >= start/);
    expect(error('{"files": ["a.py"], "line_ranges": ["a.py lines 1 to 2"]}')).toMatch(
      /line_ranges\[0\]: a string line range must look like "path\/to\/file.py:10-20"/,
    );
    expect(error('{"files": ["a.py"], "line_ranges": [{"start": 1, "end": 2}]}')).toMatch(/line_ranges\[0\]\.file: needs a "file"/);
    expect(error('{"files": ["a.py"], "line_ranges": [7]}')).toMatch(
      /line_ranges\[0\]: a line range must be \{"file": "path", "start": n, "end": m\} or "path:n-m"/,
    );
    expect(error('{files: ["a.py"]}')).toMatch(/not valid JSON/);
  });
});

describe('parseLocalizationFinish', () => {
  it('reads Table 7 locations; null or empty names are absent', () => {
    const args = JSON.stringify({
      locations: [
        { file: 'pkg/mod.py', class_name: 'Foo', function_name: 'bar' },
        { file: `${ROOT}/pkg/util.py`, class_name: null, function_name: 'helper' },
        { file: 'pkg/other.py', class_name: ' ', function_name: '' },
      ],
      thought: 'ignored',
    });
    expect(parseLocalizationFinish(args, ROOT)).toEqual({
      ok: true,
      answer: {
        locations: [
          { file: 'pkg/mod.py', class_name: 'Foo', function_name: 'bar' },
          { file: 'pkg/util.py', function_name: 'helper' },
          { file: 'pkg/other.py' },
        ],
      },
    });
    expect(parseLocalizationFinish('{"locations": []}', ROOT)).toEqual({ ok: true, answer: { locations: [] } });
  });

  it('rejects arguments outside the schema with a message', () => {
    const error = (raw: string) => {
      const parsed = parseLocalizationFinish(raw, ROOT);
      return parsed.ok ? 'accepted' : parsed.error;
    };
    expect(error('{"locations": [')).toMatch(/^localization_finish arguments are not valid JSON/);
    expect(error('')).toMatch(/locations: locations must be a list/);
    expect(error('{"locations": {"file": "a.py"}}')).toMatch(/locations: locations must be a list/);
    expect(error('{"locations": [{"file": 3}]}')).toMatch(/locations\[0\]\.file/);
    expect(error('{"locations": [{"file": "a.py", "class_name": 7}]}')).toMatch(/locations\[0\]\.class_name: must be a string or null/);
  });
});

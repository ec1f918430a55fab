import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_LIMITS } from './limits';
import { grep } from './grep';
import type { SearchEngine } from './engine';
import { makeSandboxFixture, type SandboxFixture } from '../../test/fixtures/sandbox/fixture';

let fx: SandboxFixture;
beforeAll(async () => {
  fx = await makeSandboxFixture({ manyMatches: 100_000 });
  await fs.writeFile(path.join(fx.root, 'fifty.txt'), Array.from({ length: 50 }, (_, k) => `fifty ${k}`).join('\n') + '\n');
  await fs.writeFile(path.join(fx.root, 'fifty-one.txt'), Array.from({ length: 51 }, (_, k) => `fiftyone ${k}`).join('\n') + '\n');
  await fs.writeFile(
    path.join(fx.root, 'wide.txt'),
    Array.from({ length: 50 }, (_, k) => `wide ${k} ${'w'.repeat(250)}`).join('\n') + '\n',
  );
});
afterAll(() => fx.cleanup());

describe.each<SearchEngine>(['rg', 'grep'])('grep tool [%s]', (engine) => {
  it('finds matches with repo-relative paths and line numbers, sorted by path then line', async () => {
    const r = await grep(fx.root, { pattern: 'def helper', path: 'src' }, { engine });
    expect(r).toEqual({
      status: 'ok',
      output: [
        'src/app.py:7:def helper(path):',
        'src/util/helpers.py:1:def helper_two():',
        'src/util/helpers.py:4:def helper_three():',
      ].join('\n'),
    });
  });

  it('searches the whole worktree by default, hidden files included, .git and symlinks excluded', async () => {
    const r = await grep(fx.root, { pattern: 'helper' }, { engine });
    const files = new Set(r.output.split('\n').map((l) => l.split(':')[0]));
    expect(files).toEqual(
      new Set(['.hidden/config.yml', 'docs/guide.md', 'minified.js', 'src/app.py', 'src/util/helpers.py', 'tests/test_app.py']),
    );
    expect(r.output).not.toMatch(/^links\//m);
  });

  it('scopes to one file and to a glob', async () => {
    expect((await grep(fx.root, { pattern: 'return', path: 'src/app.py' }, { engine })).output).toBe(
      'src/app.py:5:        return helper(os.getcwd())\nsrc/app.py:8:    return path.upper()',
    );
    expect((await grep(fx.root, { pattern: 'helper', glob: 'tests/**/*.py' }, { engine })).output).toBe(
      'tests/test_app.py:1:from src.app import helper\ntests/test_app.py:3:def test_helper():\ntests/test_app.py:4:    assert helper("a") == "A"',
    );
    expect((await grep(fx.root, { pattern: 'helper', glob: '*.md' }, { engine })).output).toBe('docs/guide.md:1:Use helper() to shout.');
    expect((await grep(fx.root, { pattern: 'gitdir' }, { engine })).output).toMatch(/^No matches for "gitdir" in the repository\.$/);
  });

  it('accepts an absolute path inside the root and still prints repo-relative paths', async () => {
    const r = await grep(fx.root, { pattern: 'shout', path: path.join(fx.root, 'docs') }, { engine });
    expect(r.output).toBe('docs/guide.md:1:Use helper() to shout.');
  });

  it('says plainly when nothing matches', async () => {
    expect(await grep(fx.root, { pattern: 'zzz_not_here', path: 'src' }, { engine })).toEqual({
      status: 'ok',
      output: 'No matches for "zzz_not_here" in src.',
    });
  });

  it('reports a bad regex as an error observation', async () => {
    const r = await grep(fx.root, { pattern: 'foo(' }, { engine });
    expect(r.status).toBe('error');
    expect(r.message).toMatch(/grep failed: .*(unclosed group|Unmatched \()/s);
  });

  it('shows exactly 50 matches without a marker, and marks the 51st as cut (paper: 50 matches per grep)', async () => {
    const fifty = await grep(fx.root, { pattern: '^fifty ', path: 'fifty.txt' }, { engine });
    expect(fifty.status).toBe('ok');
    expect(fifty.output.split('\n')).toHaveLength(50);
    const over = await grep(fx.root, { pattern: '^fiftyone ', path: 'fifty-one.txt' }, { engine });
    expect(over.status).toBe('truncated');
    const lines = over.output.split('\n');
    expect(lines).toHaveLength(51);
    expect(lines[49]).toBe('fifty-one.txt:50:fiftyone 49');
    expect(lines[50]).toBe('[showing the first 50 of 51 matches; narrow the pattern, path or glob to see the others]');
    expect(over.message).toBe(lines[50]);
  });

  it('caps a 100k-match grep at 50 shown, counts up to the limit, and stays fast', async () => {
    const started = Date.now();
    const r = await grep(fx.root, { pattern: 'needle', path: 'many.txt' }, { engine });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(r.status).toBe('truncated');
    const lines = r.output.split('\n');
    expect(lines.slice(0, 50).every((l, k) => l === `many.txt:${k + 1}:needle ${k}`)).toBe(true);
    expect(lines[50]).toBe(
      `[showing the first 50 of more than ${SANDBOX_LIMITS.grepCountLimit} matches; narrow the pattern, path or glob to see the others]`,
    );
  });

  it('cuts output at 4096 characters with a marker saying how many matches were shown', async () => {
    const r = await grep(fx.root, { pattern: '^wide', path: 'wide.txt' }, { engine });
    expect(r.status).toBe('truncated');
    expect(r.output.length).toBeLessThanOrEqual(4096);
    const marker = r.output.split('\n').at(-1)!;
    const shown = r.output.split('\n').filter((l) => l.startsWith('wide.txt:')).length;
    expect(marker).toBe(`[output cut to 4096 characters: ${shown} of 50 matches shown]`);
    expect(shown).toBeGreaterThan(5);
  });

  it('cuts a minified line to a readable excerpt', async () => {
    const r = await grep(fx.root, { pattern: 'function helper', path: 'minified.js' }, { engine });
    expect(r.output.length).toBeLessThan(SANDBOX_LIMITS.maxMatchLineChars + 40);
    expect(r.output).toMatch(/^minified\.js:1:var a="x+ …\[line cut\]$/);
  });

  it('skips binary files and reports a named binary file instead of searching it', async () => {
    expect((await grep(fx.root, { pattern: 'helper', path: 'data' }, { engine })).output).toMatch(/^No matches/);
    expect(await grep(fx.root, { pattern: 'helper', path: 'data/blob.bin' }, { engine })).toEqual({
      status: 'ok',
      output: 'data/blob.bin: binary file (NUL byte at offset 6); not searched',
    });
  });

  it('treats patterns that look like flags as patterns', async () => {
    await fs.writeFile(path.join(fx.root, 'flags.txt'), 'use --files here\n');
    expect((await grep(fx.root, { pattern: '--files' }, { engine })).output).toBe('flags.txt:1:use --files here');
    await fs.rm(path.join(fx.root, 'flags.txt'));
  });

  it('ends a search that runs past its timeout with an error observation', async () => {
    const started = Date.now();
    const r = await grep(fx.root, { pattern: 'needle' }, { engine, timeoutMs: 1 });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(r.status).toBe('error');
    expect(r.message).toMatch(/grep timed out after 1 ms and was stopped/);
  });

  it('returns an error observation, never an exception, for a cancelled call and a missing root', async () => {
    const controller = new AbortController();
    controller.abort();
    expect(await grep(fx.root, { pattern: 'x' }, { engine, signal: controller.signal })).toMatchObject({
      status: 'error',
      message: 'grep was cancelled',
    });
    expect(await grep(path.join(fx.parent, 'gone'), { pattern: 'x' }, { engine })).toMatchObject({ status: 'error' });
  });
});

describe('grep match counting at the count limit', () => {
  it('says "of 1000" for exactly 1000 matches and "more than 1000" for 1001', async () => {
    await fs.writeFile(path.join(fx.root, 'k1000.txt'), Array.from({ length: 1000 }, (_, k) => `kilo ${k}`).join('\n') + '\n');
    await fs.writeFile(path.join(fx.root, 'k1001.txt'), Array.from({ length: 1001 }, (_, k) => `kilo ${k}`).join('\n') + '\n');
    for (const engine of ['rg', 'grep'] as const) {
      const exact = await grep(fx.root, { pattern: '^kilo', path: 'k1000.txt' }, { engine });
      expect(exact.message).toBe('[showing the first 50 of 1000 matches; narrow the pattern, path or glob to see the others]');
      const over = await grep(fx.root, { pattern: '^kilo', path: 'k1001.txt' }, { engine });
      expect(over.message).toBe('[showing the first 50 of more than 1000 matches; narrow the pattern, path or glob to see the others]');
    }
  });
});

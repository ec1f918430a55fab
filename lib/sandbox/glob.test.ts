import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SearchEngine } from './engine';
import { glob } from './glob';
import { makeSandboxFixture, type SandboxFixture } from '../../test/fixtures/sandbox/fixture';

let fx: SandboxFixture;
beforeAll(async () => {
  fx = await makeSandboxFixture();
  for (let k = 0; k < 400; k++) {
    await fs.mkdir(path.join(fx.root, 'gen', `pkg${k % 20}`), { recursive: true });
    await fs.writeFile(path.join(fx.root, 'gen', `pkg${k % 20}`, `module_${k}.py`), '');
  }
  // A listing far longer than what is decoded for display (rg's output is only counted past its head).
  await Promise.all(
    Array.from({ length: 30 }, async (_, d) => {
      const dir = path.join(fx.root, 'wide', `directory_number_${String(d).padStart(2, '0')}`);
      await fs.mkdir(dir, { recursive: true });
      for (let k = 0; k < 50; k++) await fs.writeFile(path.join(dir, `a_rather_long_file_name_${k}.txt`), '');
    }),
  );
});
afterAll(() => fx.cleanup());

const PATTERNS = [
  'wide/**',
  '*.txt',
  '*.py',
  'src/**',
  '**/test_*.py',
  'src/*.py',
  '*.{md,yml}',
  '/README.md',
  'links/*',
  '*',
  '!gen/**',
  '**/util/*',
];

describe.each<SearchEngine>(['rg', 'grep'])('glob tool [%s]', (engine) => {
  it('lists matching files, repo-relative and sorted by path', async () => {
    expect(await glob(fx.root, { pattern: 'src/**' }, { engine })).toEqual({
      status: 'ok',
      output: ['src/app.py', 'src/util/__init__.py', 'src/util/helpers.py', 'src/util.txt'].join('\n'),
    });
    expect((await glob(fx.root, { pattern: '*.{md,yml}' }, { engine })).output).toBe('.hidden/config.yml\nREADME.md\ndocs/guide.md');
  });

  it('never lists .git, symlinks or FIFOs', async () => {
    const all = (await glob(fx.root, { pattern: '!gen/**' }, { engine })).output.split('\n');
    expect(all).toContain('src/app.py');
    expect(all).toContain('-e');
    expect(all.filter((f) => f === '.git' || f.startsWith('links/') || f === 'fifo')).toEqual([]);
  });

  it('accepts an absolute pattern under the root', async () => {
    expect((await glob(fx.root, { pattern: `${fx.root}/docs/*.md` }, { engine })).output).toBe('docs/guide.md');
  });

  it('says plainly when nothing matches', async () => {
    const r = await glob(fx.root, { pattern: '**/*.rs' }, { engine });
    expect(r.status).toBe('ok');
    expect(r.output).toMatch(/^No files match "\*\*\/\*\.rs"/);
  });

  it('cuts a long listing at 4096 characters and says how many files were shown', async () => {
    const r = await glob(fx.root, { pattern: 'gen/**/*.py' }, { engine });
    expect(r.status).toBe('truncated');
    expect(r.output.length).toBeLessThanOrEqual(4096);
    const lines = r.output.split('\n');
    const shown = lines.length - 1;
    expect(lines.at(-1)).toBe(`[output cut to 4096 characters: ${shown} of 400 matching files shown; use a narrower pattern]`);
    expect(lines[0]).toBe('gen/pkg0/module_0.py');
    expect(r.message).toBe(lines.at(-1));
  });

  it('counts every match of a listing much longer than the screen', async () => {
    const r = await glob(fx.root, { pattern: 'wide/**/*.txt' }, { engine });
    expect(r.status).toBe('truncated');
    const lines = r.output.split('\n');
    expect(lines[0]).toBe('wide/directory_number_00/a_rather_long_file_name_0.txt');
    expect(lines[1]).toBe('wide/directory_number_00/a_rather_long_file_name_1.txt');
    expect(lines[2]).toBe('wide/directory_number_00/a_rather_long_file_name_10.txt');
    expect(lines.at(-1)).toBe(`[output cut to 4096 characters: ${lines.length - 1} of 1500 matching files shown; use a narrower pattern]`);
  });

  it('refuses an invalid glob and a glob that climbs out with a reason', async () => {
    expect(await glob(fx.root, { pattern: '*.{py' }, { engine })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/unclosed/),
    });
    expect(await glob(fx.root, { pattern: 'src/../../*' }, { engine })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/'\.\.'/),
    });
  });
});

describe('glob engines agree', () => {
  it.each(PATTERNS)('%s', async (pattern) => {
    const [rg, gnu] = await Promise.all([glob(fx.root, { pattern }, { engine: 'rg' }), glob(fx.root, { pattern }, { engine: 'grep' })]);
    expect(gnu).toEqual(rg);
  });
});

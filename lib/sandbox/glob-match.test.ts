import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { comparePaths, compileGlob, passesGlobs, sortPaths } from './glob-match';

const FILES = [
  'a.txt',
  'Makefile',
  'b[1].txt',
  'with space.md',
  'x.min.js',
  'x.js',
  '.hid/h.py',
  'sub/a.txt',
  'sub/c.py',
  'sub/deep/d.py',
  'sub/deep/e.pyi',
  'src/util/x.ts',
  'src/util.txt',
  'src/util/y.test.ts',
  'tests/test_a.py',
  'tests/unit/test_b.py',
  'docs/index.rst',
];
const PATTERNS = [
  '*.py',
  'sub/*.py',
  '**/*.py',
  'sub/**',
  'sub',
  '/a.txt',
  'a.txt',
  '*.{py,pyi}',
  's?b/c.py',
  '[ab].txt',
  '[!a].txt',
  'sub/',
  '**/c.py',
  'deep',
  'deep/*.py',
  '*/c.py',
  '**',
  '*',
  '.hid',
  '!*.py',
  '!sub',
  '!sub/',
  'sub/**/d.py',
  'sub**',
  'sub*d.py',
  'src/**/*.ts',
  '**/test_*.py',
  'tests/**/test_*.py',
  '*.min.js',
  'b\\[1\\].txt',
  '/sub/deep/*',
  '**/deep/**',
  'Makefile',
  'with space.md',
  '*.PY',
  '!**/*.ts',
  'sub/[a-c].*',
  'src/util*',
];

let root: string;
beforeAll(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), 'codegrep-globmatch-'));
  for (const f of FILES) {
    await fs.mkdir(path.dirname(path.join(root, f)), { recursive: true });
    await fs.writeFile(path.join(root, f), 'x\n');
  }
});
afterAll(() => fs.rm(root, { recursive: true, force: true }));

function rgFiles(glob: string): string[] {
  try {
    const out = execFileSync('rg', ['--no-config', '--files', '--hidden', '--no-ignore', `--glob=${glob}`], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    return out.split('\n').filter(Boolean).sort();
  } catch {
    return []; // rg exits 1 when nothing matches
  }
}

describe('compileGlob matches ripgrep --glob', () => {
  it.each(PATTERNS)('%s', (pattern) => {
    const compiled = compileGlob(pattern);
    expect(compiled.ok).toBe(true);
    if (!compiled.ok) return;
    const ours = FILES.filter((f) => passesGlobs([compiled.glob], f)).sort();
    expect(ours).toEqual(rgFiles(pattern));
  });

  it('refuses globs ripgrep refuses, with the reason', () => {
    expect(compileGlob('*.{py')).toMatchObject({ ok: false, message: expect.stringMatching(/unclosed '\{'/) });
    expect(compileGlob('[a')).toMatchObject({ ok: false, message: expect.stringMatching(/unclosed character class/) });
    expect(compileGlob('')).toMatchObject({ ok: false });
    expect(compileGlob('{a,{b,c}}')).toMatchObject({ ok: false, message: expect.stringMatching(/nests/) });
  });

  it('combines several globs the way ripgrep does (last match wins)', () => {
    const globs = ['*.py', '!sub/**'].map((g) => {
      const c = compileGlob(g);
      if (!c.ok) throw new Error(c.message);
      return c.glob;
    });
    expect(passesGlobs(globs, 'tests/test_a.py')).toBe(true);
    expect(passesGlobs(globs, 'sub/c.py')).toBe(false);
    expect(passesGlobs(globs, 'a.txt')).toBe(false);
  });
});

describe('comparePaths', () => {
  it('orders like ripgrep --sort=path (directory entries by name, depth first)', () => {
    const rg = execFileSync('rg', ['--no-config', '--files', '--hidden', '--no-ignore', '--sort=path'], { cwd: root, encoding: 'utf8' })
      .split('\n')
      .filter(Boolean);
    expect([...FILES].sort(comparePaths)).toEqual(rg);
    expect(sortPaths([...FILES].reverse())).toEqual(rg);
    expect(comparePaths('src/util/x.ts', 'src/util.txt')).toBeLessThan(0);
  });
});

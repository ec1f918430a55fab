import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asOperand, canonicalRoot, guardPath } from './paths';
import { makeSandboxFixture, type SandboxFixture } from '../../test/fixtures/sandbox/fixture';

let fx: SandboxFixture;
let rootAlias: string;
beforeAll(async () => {
  fx = await makeSandboxFixture();
  // The root reached through a symlink: the guard must canonicalise the root too.
  rootAlias = path.join(fx.parent, 'alias');
  await fs.symlink('repo', rootAlias);
});
afterAll(() => fx.cleanup());

describe('guardPath', () => {
  it('resolves relative paths to canonical absolute and repo-relative forms', async () => {
    const r = await guardPath(fx.root, 'src/../src/app.py');
    expect(r).toMatchObject({ ok: true, relative: 'src/app.py', kind: 'file' });
    if (r.ok) expect(r.absolute).toBe(path.join(await fs.realpath(fx.root), 'src/app.py'));
  });

  it("treats '', '.' and './' as the root", async () => {
    for (const p of ['', '.', './', '  ']) {
      expect(await guardPath(fx.root, p)).toMatchObject({ ok: true, relative: '.', kind: 'directory' });
    }
  });

  it('accepts absolute paths inside the root, given as the root or its realpath', async () => {
    expect(await guardPath(fx.root, path.join(fx.root, 'src'))).toMatchObject({ ok: true, relative: 'src' });
    expect(await guardPath(rootAlias, path.join(rootAlias, 'src/app.py'))).toMatchObject({ ok: true, relative: 'src/app.py' });
    expect(await guardPath(rootAlias, path.join(fx.root, 'src/app.py'))).toMatchObject({ ok: true, relative: 'src/app.py' });
  });

  it('accepts a symlink that stays inside the root and names its target', async () => {
    expect(await guardPath(fx.root, 'links/inside')).toMatchObject({ ok: true, relative: 'src/app.py', kind: 'file' });
  });

  it('refuses escapes with messages naming the path', async () => {
    const cases: Array<[string, RegExp]> = [
      ['..', /path "\.\." leaves the repository root/],
      ['src/../../repo-other', /leaves the repository root/],
      ['/etc/passwd', /"\/etc\/passwd" is outside the repository root/],
      [`${fx.root}-sibling/x`, /outside the repository root/],
      ['links/out-file', /resolves \(through a symlink\) to outside the repository root/],
      ['links/out-dir', /through a symlink/],
      ['links/loop-a', /symlink loop/],
      ['missing.py', /no such file or directory: "missing\.py"/],
      ['src/app.py/x', /not a directory|no such file/],
      ['a\u0000b', /NUL byte/],
      ['x'.repeat(5000), /longer than 4096/],
    ];
    for (const [input, message] of cases) {
      const r = await guardPath(fx.root, input);
      expect(r.ok, input).toBe(false);
      if (!r.ok) expect(r.message).toMatch(message);
    }
  });

  it('reports FIFOs as "other" so tools can refuse them', async () => {
    expect(await guardPath(fx.root, 'fifo')).toMatchObject({ ok: true, kind: 'other' });
  });

  it('never throws, even for a missing root', async () => {
    const r = await guardPath(path.join(fx.parent, 'nope'), 'x');
    expect(r).toMatchObject({ ok: false });
    if (!r.ok) expect(r.message).toMatch(/worktree root .* is not accessible \(ENOENT\)/);
    expect(await canonicalRoot(path.join(fx.root, 'README.md'))).toMatchObject({
      ok: false,
      message: expect.stringMatching(/not a directory/),
    });
  });
});

describe('asOperand', () => {
  it('keeps an operand from ever reading as a flag', () => {
    expect(asOperand('-e')).toBe('./-e');
    expect(asOperand('--files')).toBe('./--files');
    expect(asOperand('src/app.py')).toBe('src/app.py');
  });
});

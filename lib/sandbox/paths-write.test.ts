import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { guardWritePath, isGitRefusedComponent } from './paths';

describe('isGitRefusedComponent (git verify_path: verify_dotfile, is_ntfs_dotgit, is_hfs_dotgit)', () => {
  it.each([
    '.git',
    '.GIT',
    '.Git',
    '.git ',
    '.git.',
    '.git. . ',
    '.git::$INDEX_ALLOCATION',
    '.GIT::$index_allocation',
    '.git:stream',
    '.git .:x',
    'git~1',
    'GIT~1',
    'git~1. ',
    '.g\u200cit',
    '\u200d.GIT',
    '.git\ufeff',
    '.g\u202ai\u206ft',
  ])('refuses %j', (name) => {
    expect(isGitRefusedComponent(name)).toBe(true);
  });

  it.each([
    '.gitignore',
    '.gitattributes',
    '.gitmodules',
    'git',
    '.gi',
    'x.git',
    '.git-x',
    '.gitx ',
    'git~2',
    'git~10',
    '.git_',
    '.g\u00a0it',
  ])('allows %j', (name) => {
    expect(isGitRefusedComponent(name)).toBe(false);
  });
});

describe('guardWritePath', () => {
  let parent: string;
  let root: string;
  beforeEach(async () => {
    parent = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'write-guard-')));
    root = path.join(parent, 'repo');
    await fs.mkdir(path.join(root, 'pkg', 'sub'), { recursive: true });
    await fs.mkdir(path.join(parent, 'outside'));
    await fs.writeFile(path.join(root, 'pkg', 'mod.py'), 'a = 1\n', { mode: 0o755 });
    await fs.symlink(path.join(parent, 'outside'), path.join(root, 'out'));
    await fs.symlink('pkg', path.join(root, 'inner'));
    await fs.link(path.join(root, 'pkg', 'mod.py'), path.join(root, 'hard.py'));
    await fs.writeFile(path.join(root, 'file.txt'), 'x');
  });
  afterEach(() => fs.rm(parent, { recursive: true, force: true }));

  it('allows a not-yet-existing leaf and parents below existing directories, and names the deepest existing one', async () => {
    expect(await guardWritePath(root, 'pkg/sub/new/deeper/x.py', 'new-file')).toEqual({
      ok: true,
      root,
      absolute: path.join(root, 'pkg/sub/new/deeper/x.py'),
      relative: 'pkg/sub/new/deeper/x.py',
      existingParent: path.join(root, 'pkg', 'sub'),
      mode: 0o644,
      size: 0,
    });
    // Absolute inside the root, also spelt through the given root path.
    expect(await guardWritePath(root, path.join(root, 'new.py'), 'new-file')).toMatchObject({ ok: true, relative: 'new.py' });
  });

  it('returns an existing file with its mode and size, and says exists / missing', async () => {
    await fs.rm(path.join(root, 'hard.py'));
    expect(await guardWritePath(root, 'pkg/mod.py', 'existing-file')).toMatchObject({ ok: true, mode: 0o755, size: 6 });
    expect(await guardWritePath(root, 'pkg/mod.py', 'new-file')).toMatchObject({ ok: false, reason: 'exists' });
    expect(await guardWritePath(root, 'pkg/none.py', 'existing-file')).toMatchObject({ ok: false, reason: 'missing' });
  });

  it.each([
    ['../escape.py', /leaves the repository root/],
    ['/etc/passwd', /outside the repository root/],
    ['out/x.py', /out is a symlink; the editor never writes through symlinks/],
    ['inner/x.py', /inner is a symlink/],
    ['file.txt/x.py', /file\.txt is not a directory/],
    ['pkg/.git/config', /inside \.git; refused/],
    ['pkg/.git /config', /inside \.git; refused/],
    ['a\\b.py', /backslash/],
    ['a\0b.py', /NUL byte/],
    ['', /must name a file/],
    ['.', /not the repository root/],
  ])('refuses %j', async (userPath, message) => {
    const result = await guardWritePath(root, userPath, 'new-file');
    expect(result).toMatchObject({ ok: false, reason: 'refused', message: expect.stringMatching(message) });
  });

  it('refuses a hard-linked file, a directory and a missing root for edits', async () => {
    expect(await guardWritePath(root, 'hard.py', 'existing-file')).toMatchObject({
      ok: false,
      message: expect.stringMatching(/other hard links/),
    });
    expect(await guardWritePath(root, 'pkg', 'existing-file')).toMatchObject({
      ok: false,
      message: expect.stringMatching(/is a directory/),
    });
    expect(await guardWritePath(path.join(parent, 'nope'), 'x.py', 'new-file')).toMatchObject({
      ok: false,
      message: expect.stringMatching(/not accessible/),
    });
  });
});

import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { collectWorkspacePatch, nestedGitEntries } from './workspace-patch';

let parent: string;
let source: string;
let checkout: string;
let bare: string;
let base: string;

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@localhost', ...args], {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
  });
}

beforeEach(async () => {
  // A bare clone and a linked worktree of it, as the downstream runs make them (run-worktree.ts).
  parent = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'workspace-patch-')));
  source = path.join(parent, 'source');
  await fs.mkdir(path.join(source, 'pkg'), { recursive: true });
  git(parent, 'init', '--quiet', '--initial-branch=main', source);
  await fs.writeFile(path.join(source, 'pkg', 'mod.py'), 'a = 1\n');
  await fs.writeFile(path.join(source, 'pkg', 'link-me.txt'), 'plain\n');
  git(source, 'add', '-A');
  git(source, 'commit', '--quiet', '--no-verify', '-m', 'base');
  base = git(source, 'rev-parse', 'HEAD').trim();
  bare = path.join(parent, 'bare.git');
  git(parent, 'clone', '--quiet', '--bare', source, bare);
  checkout = path.join(parent, 'run', 'repo');
  git(bare, 'worktree', 'add', '--quiet', '--detach', checkout, base);
});
afterEach(() => fs.rm(parent, { recursive: true, force: true }));

describe('collectWorkspacePatch', () => {
  it('gives an empty patch for an untouched checkout', async () => {
    expect(await collectWorkspacePatch(checkout, base)).toEqual({ patch: '', dropped: [] });
  });

  it('keeps whole files in path order while they fit, skips the ones that do not, and names them', async () => {
    await fs.writeFile(path.join(checkout, 'a-small.txt'), 'small a\n');
    await fs.writeFile(path.join(checkout, 'b-big.txt'), 'big line\n'.repeat(2000));
    await fs.writeFile(path.join(checkout, 'c-small.txt'), 'small c\n');
    await fs.writeFile(path.join(checkout, 'pkg', 'mod.py'), 'a = 2\n');
    const { patch, dropped } = await collectWorkspacePatch(checkout, base, { maxPatchBytes: 4096 });
    expect(dropped).toEqual([{ path: 'b-big.txt', bytes: expect.any(Number), reason: 'patch-size-cap' }]);
    expect(dropped[0]!.bytes).toBeGreaterThan(18_000);
    expect([...patch.matchAll(/^diff --git a\/(\S+)/gm)].map((m) => m[1])).toEqual(['a-small.txt', 'c-small.txt', 'pkg/mod.py']);
    expect(Buffer.byteLength(patch)).toBeLessThanOrEqual(4096);
    // The kept part applies on the base commit.
    const fresh = path.join(parent, 'fresh');
    git(bare, 'worktree', 'add', '--quiet', '--detach', fresh, base);
    await fs.writeFile(path.join(parent, 'kept.patch'), patch);
    git(fresh, 'apply', path.join(parent, 'kept.patch'));
    expect(await fs.readFile(path.join(fresh, 'pkg', 'mod.py'), 'utf8')).toBe('a = 2\n');
  });

  it('keeps the two parts of a type change together', async () => {
    await fs.rm(path.join(checkout, 'pkg', 'link-me.txt'));
    await fs.symlink('mod.py', path.join(checkout, 'pkg', 'link-me.txt'));
    const { patch, dropped } = await collectWorkspacePatch(checkout, base);
    expect(dropped).toEqual([]);
    expect(patch.match(/^diff --git a\/pkg\/link-me.txt/gm)).toHaveLength(2);
    const tooSmall = await collectWorkspacePatch(checkout, base, { maxPatchBytes: 100 });
    expect(tooSmall).toEqual({
      patch: '',
      dropped: [{ path: 'pkg/link-me.txt', bytes: Buffer.byteLength(patch), reason: 'patch-size-cap' }],
    });
  });

  it('writes neither the checkout index nor the shared bare clone', async () => {
    await fs.writeFile(path.join(checkout, 'new.py'), 'NEW = 1\n');
    const objectsBefore = git(bare, 'count-objects', '-v');
    const { patch } = await collectWorkspacePatch(checkout, base);
    expect(patch).toContain('+++ b/new.py');
    expect(git(bare, 'count-objects', '-v')).toBe(objectsBefore);
    // The checkout's own index still has nothing staged: new.py is untracked there.
    expect(git(checkout, 'status', '--porcelain')).toBe('?? new.py\n');
  });
});

describe('collectWorkspacePatch and the checkout index', () => {
  it('leaves untouched files out under the attributes SWE-bench repositories commit (text=auto, eol=lf, binary)', async () => {
    // Django-, matplotlib- and astropy-style attribute files: on Linux none of them changes bytes on checkout.
    await fs.writeFile(path.join(source, '.gitattributes'), '* text=auto\n*.html text eol=lf\n*.fits binary\ndocs/*.txt merge=union\n');
    await fs.writeFile(path.join(source, 'page.html'), '<p>one</p>\n');
    await fs.writeFile(path.join(source, 'legacy.txt'), 'committed\r\nwith CRLF\r\n');
    await fs.writeFile(path.join(source, 'image.fits'), Buffer.from([0, 1, 2, 13, 10]));
    git(source, 'add', '-A');
    git(source, 'commit', '--quiet', '--no-verify', '-m', 'attributes');
    const head = git(source, 'rev-parse', 'HEAD').trim();
    git(bare, 'fetch', '--quiet', source, 'main:main');
    const attributed = path.join(parent, 'attributed');
    git(bare, 'worktree', 'add', '--quiet', '--detach', attributed, head);
    await fs.writeFile(path.join(attributed, 'pkg', 'mod.py'), 'a = 2\n');
    const { patch } = await collectWorkspacePatch(attributed, head);
    expect([...patch.matchAll(/^diff --git a\/(\S+)/gm)].map((m) => m[1])).toEqual(['pkg/mod.py']);
  });

  it('starts from the base tree when the checkout has no index', async () => {
    const index = git(checkout, 'rev-parse', '--path-format=absolute', '--git-path', 'index').trim();
    await fs.rm(index);
    await fs.writeFile(path.join(checkout, 'pkg', 'mod.py'), 'a = 3\n');
    const { patch } = await collectWorkspacePatch(checkout, base);
    expect(patch).toContain('-a = 1\n+a = 3\n');
    expect([...patch.matchAll(/^diff --git a\/(\S+)/gm)].map((m) => m[1])).toEqual(['pkg/mod.py']);
  });
});

describe('nestedGitEntries', () => {
  it("lists every name git refuses below the root, not the root's own .git", async () => {
    for (const dir of ['pkg/.git', 'pkg/deep/.GIT', '.git ', 'git~1', 'pkg/.gitignore-not'])
      await fs.mkdir(path.join(checkout, dir), { recursive: true });
    expect((await nestedGitEntries(checkout)).map((p) => path.relative(checkout, p))).toEqual([
      '.git ',
      'git~1',
      'pkg/.git',
      'pkg/deep/.GIT',
    ]);
  });
});

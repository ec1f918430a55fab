import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createEditor, EDITOR_LIMITS, runEditor } from '../../lib/downstream/agents/editor';
import { collectWorkspacePatch, MAX_PATCH_BYTES, workspacePatch } from '../../lib/downstream/runs/workspace-patch';
import { recordAttack } from './attack-log';

/**
 * The downstream editor and its patch step under attack: size and count caps, an outside process flipping a
 * directory into a symlink while the editor writes, names git refuses, `.gitattributes` that make git throw
 * or run a program, a patch past git's output cap, and 50 concurrent edits of one file. Each case drives the
 * real editor (writes inside the bubblewrap namespace) and the real `git`.
 */
const IDENTITY = ['-c', 'user.name=t', '-c', 'user.email=t@localhost', '-c', 'commit.gpgsign=false'];
let parent: string;
let root: string;
let outside: string;
let base: string;
let marker: string;

function sh(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
  });
}

beforeEach(async () => {
  parent = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'codegrep-editor-attack-')));
  root = path.join(parent, 'repo');
  outside = path.join(parent, 'outside');
  marker = path.join(parent, 'PWNED');
  await fs.mkdir(path.join(root, 'pkg'), { recursive: true });
  await fs.mkdir(outside);
  await fs.writeFile(path.join(outside, 'secret.txt'), 'secret\n');
  sh(parent, 'init', '--quiet', '--initial-branch=main', root);
  await fs.writeFile(path.join(root, 'pkg', 'mod.py'), 'a = 1\n');
  sh(root, 'add', '-A');
  sh(root, ...IDENTITY, 'commit', '--quiet', '--no-verify', '-m', 'base');
  base = sh(root, 'rev-parse', 'HEAD').trim();
});
afterEach(async () => {
  await fs.rm(parent, { recursive: true, force: true });
});

const edit = (args: Record<string, unknown>) => runEditor(root, args);

describe('finding: the editor has no size or count caps', () => {
  it('refuses a create larger than view accepts, and every file it creates can be viewed', async () => {
    const over = await edit({ command: 'create', path: 'big.txt', file_text: 'x'.repeat(EDITOR_LIMITS.maxFileBytes + 1) });
    recordAttack('editor', 'create one byte over the file limit', over.status === 'error' ? 'refused' : 'escaped');
    expect(over).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/file_text is \d+ bytes, over the editor's \d+-byte limit/),
    });
    expect(existsSync(path.join(root, 'big.txt'))).toBe(false);

    const line = 'y'.repeat(99) + '\n';
    const atLimit = line.repeat(EDITOR_LIMITS.maxFileBytes / line.length);
    expect((await edit({ command: 'create', path: 'at-limit.txt', file_text: atLimit })).status).toBe('ok');
    expect((await fs.stat(path.join(root, 'at-limit.txt'))).size).toBe(Buffer.byteLength(atLimit));
    expect(['ok', 'truncated']).toContain((await edit({ command: 'view', path: 'at-limit.txt' })).status);
  });

  it('refuses an old_str or new_str over the limit, and an edit that would leave a file view refuses', async () => {
    const huge = 'z'.repeat(EDITOR_LIMITS.maxEditStringBytes + 1);
    for (const args of [
      { command: 'str_replace', path: 'pkg/mod.py', old_str: 'a = 1', new_str: huge },
      { command: 'str_replace', path: 'pkg/mod.py', old_str: huge, new_str: 'b' },
      { command: 'insert', path: 'pkg/mod.py', insert_line: 1, new_str: huge },
    ]) {
      const result = await edit(args);
      recordAttack(
        'editor',
        `${args.command} with a ${huge.length}-byte string (${args.old_str === huge ? 'old_str' : 'new_str'})`,
        result.status === 'error' ? 'refused' : 'escaped',
      );
      expect(result).toMatchObject({
        status: 'error',
        message: expect.stringMatching(/(old|new)_str is \d+ bytes, over the editor's \d+-byte limit/),
      });
    }
    expect(await fs.readFile(path.join(root, 'pkg', 'mod.py'), 'utf8')).toBe('a = 1\n');

    // Growing a file under the limit past it, one allowed insert after another, stops at the limit.
    const nearly = 'n'.repeat(EDITOR_LIMITS.maxFileBytes - 1000) + '\n';
    await fs.writeFile(path.join(root, 'near.txt'), nearly);
    const grow = await edit({ command: 'insert', path: 'near.txt', insert_line: 1, new_str: 'g'.repeat(2000) });
    recordAttack('editor', 'insert that grows a file past the view limit', grow.status === 'error' ? 'refused' : 'escaped');
    expect(grow).toMatchObject({ status: 'error', message: expect.stringMatching(/the edited near\.txt is \d+ bytes, over the editor's/) });
    expect(await fs.readFile(path.join(root, 'near.txt'), 'utf8')).toBe(nearly);
  });

  it(`refuses the create after the episode's ${EDITOR_LIMITS.maxCreatedFilesPerEpisode}th, also when the calls come at once`, async () => {
    const editor = createEditor(root);
    const attempts = EDITOR_LIMITS.maxCreatedFilesPerEpisode + 20;
    const results = [];
    // Eight at a time: concurrent enough that a check-then-count race would overshoot.
    for (let start = 0; start < attempts; start += 8) {
      const batch = Array.from({ length: Math.min(8, attempts - start) }, (_, k) =>
        editor.run({ command: 'create', path: `many/f${start + k}.txt`, file_text: 'x\n' }),
      );
      results.push(...(await Promise.all(batch)));
    }
    const ok = results.filter((r) => r.status === 'ok').length;
    recordAttack('editor', `${attempts} creates in one episode`, ok === EDITOR_LIMITS.maxCreatedFilesPerEpisode ? 'refused' : 'escaped');
    expect(ok).toBe(EDITOR_LIMITS.maxCreatedFilesPerEpisode);
    expect(
      results
        .filter((r) => r.status === 'error')
        .every((r) => /this episode already created \d+ files, the editor's limit/.test(r.message ?? '')),
    ).toBe(true);
    expect((await fs.readdir(path.join(root, 'many'))).length).toBe(EDITOR_LIMITS.maxCreatedFilesPerEpisode);
    expect(editor.createdFiles()).toBe(EDITOR_LIMITS.maxCreatedFilesPerEpisode);
  }, 120_000);
});

describe('finding: an outside process flipping a directory into a symlink redirects writes', () => {
  /** A real concurrent process that keeps turning `flip` into a directory and into a link to `outside`. */
  function startFlipper(): ChildProcess {
    return spawn(
      'sh',
      ['-c', 'cd "$1" && while :; do rm -rf flip; mkdir flip; rm -rf flip; ln -s "$2" flip; done', 'flipper', root, outside],
      {
        stdio: 'ignore',
      },
    );
  }

  async function race(
    isolation: 'namespace' | 'filter-only',
    rounds: number,
    stopAtFirstEscape: boolean,
  ): Promise<{ landed: string[]; ok: number }> {
    const flipper = startFlipper();
    const editor = createEditor(root, { isolation, limits: { maxCreatedFilesPerEpisode: 10 * rounds } });
    let ok = 0;
    try {
      for (let i = 0; i < rounds; i++) {
        for (const target of [`flip/f${i}.txt`, `flip/d${i}/f.txt`]) {
          if ((await editor.run({ command: 'create', path: target, file_text: 'PWNED\n' })).status === 'ok') ok += 1;
        }
        if (stopAtFirstEscape && (await fs.readdir(outside)).length > 1) break;
      }
    } finally {
      flipper.kill('SIGKILL');
      await new Promise((resolve) => flipper.once('exit', resolve));
    }
    return { landed: (await fs.readdir(outside)).filter((name) => name !== 'secret.txt'), ok };
  }

  // The race is live: during development, in-process (filter-only) writes under the same flipper put files
  // outside within a few thousand rounds. That control depends on the scheduler winning the race, so it is not a
  // test here (it failed to hit on a loaded machine); the namespace's guarantee below does not depend on timing.
  it('in the namespace, no file ever lands outside the root, over many rounds', async () => {
    const { landed, ok } = await race('namespace', 300, false);
    recordAttack(
      'editor',
      'create while an outside process flips a directory and a symlink',
      landed.length === 0 ? 'contained' : 'escaped',
    );
    expect(landed).toEqual([]);
    expect(await fs.readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('secret\n');
    // Some creates found `flip` a directory and succeeded: the race was run, not refused wholesale.
    expect(ok).toBeGreaterThan(0);
  }, 240_000);
});

describe('finding: names git refuses', () => {
  it.each([
    ['.git ', '.git /config'],
    ['.git.', 'pkg/.git./hooks/x'],
    ['.git. . (dots and spaces)', 'pkg/.git. ./x'],
    ['.GIT', 'pkg/.GIT/config'],
    ['an NTFS stream', '.git::$INDEX_ALLOCATION/config'],
    ['a stream with trailing dot', 'pkg/.git.:x/y'],
    ['the 8.3 short name', 'GIT~1/config'],
    ['HFS ignorable ZWNJ', 'pkg/.g\u200cit/config'],
    ['HFS ignorable BOM in .GIT', '.GI\ufeffT/hooks/pre-commit'],
    ['a backslash', 'pkg\\.git\\config'],
    ['a NUL', 'pkg/mod\0.py'],
  ])('create under %s is refused', async (_what, target) => {
    const result = await edit({ command: 'create', path: target, file_text: 'x' });
    recordAttack('editor', `create ${JSON.stringify(target)}`, result.status === 'error' ? 'refused' : 'escaped');
    expect(result).toMatchObject({ status: 'error', message: expect.stringMatching(/inside \.git; refused|backslash|NUL byte/) });
    expect((await fs.readdir(root)).sort()).toEqual(['.git', 'pkg']);
  });

  it('a folder named ".git " or ".git." put there some other way does not make the patch throw: it is excluded and named', async () => {
    for (const name of ['.git ', 'pkg/.git.', 'pkg/GIT~1', '.GIT']) {
      await fs.mkdir(path.join(root, name), { recursive: true });
      await fs.writeFile(path.join(root, name, 'config'), '[core]\n\tfsmonitor = touch PWNED\n');
    }
    expect((await edit({ command: 'str_replace', path: 'pkg/mod.py', old_str: 'a = 1', new_str: 'a = 2' })).status).toBe('ok');
    const collected = await collectWorkspacePatch(root, base);
    recordAttack(
      'patch',
      'folders named .git , .git., GIT~1, .GIT in the checkout',
      collected.patch.includes('+a = 2') ? 'contained' : 'escaped',
    );
    expect(collected.patch).toContain('-a = 1\n+a = 2');
    expect(collected.patch).not.toContain('fsmonitor');
    expect(collected.dropped.map((d) => [d.path, d.reason])).toEqual([
      ['.GIT', 'name-git-refuses'],
      ['.git ', 'name-git-refuses'],
      ['pkg/.git.', 'name-git-refuses'],
      ['pkg/GIT~1', 'name-git-refuses'],
    ]);
    expect(collected.dropped.every((d) => d.bytes > 0)).toBe(true);
  });
});

describe('finding: .gitattributes can break or hijack the patch', () => {
  beforeEach(() => {
    // The repository's own config defines every driver the attributes name, so a git that honoured them would run the payload.
    for (const [key, value] of [
      ['filter.evil.clean', `touch ${marker}`],
      ['filter.evil.smudge', `touch ${marker}`],
      ['filter.evil.process', `touch ${marker}`],
      ['filter.evil.required', 'true'],
      ['diff.evil.textconv', `touch ${marker};`],
      ['diff.evil.command', `touch ${marker}`],
    ]) {
      sh(root, 'config', key!, value!);
    }
  });

  it.each([
    ['working-tree-encoding=UTF-16', '* working-tree-encoding=UTF-16\n'],
    ['working-tree-encoding on one file', 'pkg/*.py working-tree-encoding=UTF-16LE\n'],
    ['filter= with a required driver', '* filter=evil\n'],
    ['diff= driver (textconv and command)', '* diff=evil\n'],
    ['eol=crlf and text', '* text eol=crlf\n'],
    ['ident', '* ident\n'],
    ['a macro that expands to a filter', '[attr]innocent filter=evil diff=evil\n* innocent\n'],
    ['all of them, in a nested .gitattributes too', '* text eol=crlf working-tree-encoding=UTF-16 filter=evil diff=evil ident\n'],
  ])('%s: the patch neither throws nor runs anything, and holds the bytes as written', async (what, attributes) => {
    await fs.writeFile(path.join(root, '.gitattributes'), attributes);
    await fs.writeFile(path.join(root, 'pkg', '.gitattributes'), attributes);
    expect((await edit({ command: 'str_replace', path: 'pkg/mod.py', old_str: 'a = 1', new_str: 'a = 2 # $Id$' })).status).toBe('ok');
    expect((await edit({ command: 'create', path: 'pkg/crlf.txt', file_text: 'one\r\ntwo\n' })).status).toBe('ok');
    const patch = await workspacePatch(root, base);
    recordAttack('patch', `.gitattributes ${what}`, existsSync(marker) ? 'escaped' : 'contained');
    expect(existsSync(marker)).toBe(false);
    expect(patch).toContain('-a = 1\n+a = 2 # $Id$\n');
    expect(patch).toContain('+one\r\n+two\n');
    expect(patch).toContain('+++ b/.gitattributes');
  });
});

describe('finding: a patch over git.ts output cap was lost whole', () => {
  it('a 70 MiB patch keeps the files that fit, in path order, and names the one it dropped with its size', async () => {
    const line = 'a line of a generated file that the agent wrote\n';
    await fs.mkdir(path.join(root, 'gen'));
    await fs.writeFile(path.join(root, 'gen', 'a-huge.txt'), line.repeat(Math.ceil((66 * 1024 * 1024) / line.length)));
    await fs.writeFile(path.join(root, 'gen', 'b-medium.txt'), line.repeat(Math.ceil((4 * 1024 * 1024) / line.length)));
    expect((await edit({ command: 'str_replace', path: 'pkg/mod.py', old_str: 'a = 1', new_str: 'a = 2' })).status).toBe('ok');
    const collected = await collectWorkspacePatch(root, base);
    recordAttack('patch', 'a patch of 70 MiB', collected.patch.includes('+a = 2') ? 'contained' : 'escaped');
    expect(collected.dropped).toHaveLength(1);
    expect(collected.dropped[0]).toMatchObject({ path: 'gen/a-huge.txt', reason: 'patch-size-cap' });
    expect(collected.dropped[0]!.bytes).toBeGreaterThan(66 * 1024 * 1024);
    expect(Buffer.byteLength(collected.patch)).toBeLessThanOrEqual(MAX_PATCH_BYTES);
    expect(collected.patch).toContain('+++ b/gen/b-medium.txt');
    expect(collected.patch).toContain('-a = 1\n+a = 2');
    expect(collected.patch).not.toContain('a-huge.txt');
    // What is kept applies cleanly on the base.
    sh(root, 'stash', '--include-untracked', '--quiet');
    const patchFile = path.join(parent, 'kept.patch');
    await fs.writeFile(patchFile, collected.patch);
    sh(root, 'apply', '--check', patchFile);
  }, 180_000);
});

describe('finding: concurrent edits of one file were lost', () => {
  it('50 concurrent str_replace calls on distinct lines all apply', async () => {
    const lines = Array.from({ length: 50 }, (_, k) => `v${k} = 0\n`);
    await fs.writeFile(path.join(root, 'pkg', 'many.py'), lines.join(''));
    const results = await Promise.all(
      lines.map((_, k) => edit({ command: 'str_replace', path: 'pkg/many.py', old_str: `v${k} = 0\n`, new_str: `v${k} = 1\n` })),
    );
    const text = await fs.readFile(path.join(root, 'pkg', 'many.py'), 'utf8');
    const applied = lines.filter((_, k) => text.includes(`v${k} = 1\n`)).length;
    recordAttack('editor', '50 concurrent str_replace on distinct lines of one file', applied === 50 ? 'contained' : 'escaped');
    expect(results.map((r) => r.status)).toEqual(Array(50).fill('ok'));
    expect(applied).toBe(50);
  });

  it('50 concurrent str_replace calls of the same old_str: one applies, the others are told it is gone', async () => {
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, k) => edit({ command: 'str_replace', path: 'pkg/mod.py', old_str: 'a = 1', new_str: `b = ${k}` })),
    );
    const winners = results.flatMap((r, k) => (r.status === 'ok' ? [k] : []));
    recordAttack('editor', '50 concurrent str_replace of one old_str', winners.length === 1 ? 'contained' : 'escaped');
    expect(winners).toHaveLength(1);
    expect(await fs.readFile(path.join(root, 'pkg', 'mod.py'), 'utf8')).toBe(`b = ${winners[0]!}\n`);
    expect(results.filter((r) => r.status === 'error').every((r) => /did not appear verbatim/.test(r.message ?? ''))).toBe(true);
  });
});

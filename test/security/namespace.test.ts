import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ToolResult } from '../../schemas/tools';
import type { SearchEngine } from '../../lib/sandbox/engine';
import { findExecutable } from '../../lib/sandbox/executables';
import { probeNamespace } from '../../lib/sandbox/namespace';
import { runTool } from '../../lib/sandbox/run-tool';
import { runPipeline, toolPlacement, type Stage } from '../../lib/sandbox/subprocess';
import { recordAttack } from './attack-log';

/**
 * Isolation by construction (README, Security): every tool process runs in a bubblewrap namespace that holds
 * the worktree and no other data, with `.git` emptied. Built for real: a bare clone with a linked worktree
 * made by `git worktree add` (its `.git` file names the bare clone), and a plain clone whose `.git/config`
 * holds a remote URL with a token. Committed symlinks point out of the worktree (relative, absolute, into a
 * directory, one with a newline in its name, one with a long target) at files holding a secret.
 *
 * Three layers are checked: the tools as the agent calls them (namespace + allowlist + path guard), the
 * namespace alone (programs run with the flags the allowlist refuses: -L, no .git exclusion), and the
 * allowlist alone (`filter-only`), which must still hold the precedence overrides of ripgrep's globs.
 */
const ENGINES: SearchEngine[] = ['rg', 'grep'];
let parent: string;
let bare: string;
let linked: string;
let plain: string;
let outsideFile: string;
let secretToken: string;
let urlToken: string;

/** Names of this machine the repository cannot know, and contents only the outside holds. */
const outsideNames = () => [parent, bare, secretToken, urlToken, 'worktrees/linked', 'example.invalid'];

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
  });
}

function expectNothingOutside(label: string, text: string): void {
  for (const name of outsideNames()) expect(text, `${label} shows ${name}`).not.toContain(name);
}

const shown = (r: ToolResult) => `${r.output}\n${r.message ?? ''}`;

beforeAll(async () => {
  expect(await probeNamespace()).toMatchObject({ ok: true });
  parent = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'codegrep-nsdata-')));
  secretToken = `SECRET-TOKEN-${randomBytes(8).toString('hex')}`;
  urlToken = `ghp_${randomBytes(12).toString('hex')}`;
  // The absolute link's target lies outside the data dir, so the link text (repository content) does not
  // contain the data dir's name; what it names holds the secret.
  outsideFile = path.join(os.tmpdir(), `codegrep-nsoutside-${randomBytes(6).toString('hex')}.txt`);
  await fs.writeFile(outsideFile, `${secretToken}\n`);
  await fs.writeFile(path.join(parent, 'secret.txt'), `${secretToken}\n`);
  await fs.mkdir(path.join(parent, 'outside'));
  await fs.writeFile(path.join(parent, 'outside', 'secret.py'), `TOKEN = "${secretToken}"\n`);

  const source = path.join(parent, 'source');
  git(parent, 'init', '--quiet', '--initial-branch=main', source);
  await fs.mkdir(path.join(source, 'src'));
  await fs.mkdir(path.join(source, 'links'));
  await fs.writeFile(path.join(source, 'src', 'app.py'), 'def helper():\n    return "gitdir url"\n');
  // Relative links climb from <worktree>/links to the data dir (both checkouts sit two levels below it).
  await fs.symlink('../../../secret.txt', path.join(source, 'links', 'out-file'));
  await fs.symlink('../../../outside', path.join(source, 'links', 'out-dir'));
  await fs.symlink(outsideFile, path.join(source, 'links', 'abs-out'));
  await fs.symlink(outsideFile, path.join(source, 'links', 'evil\nname'));
  await fs.symlink(`${'../'.repeat(40)}${outsideFile.slice(1)}`, path.join(source, 'links', 'long-target'));
  await fs.symlink('../src/app.py', path.join(source, 'links', 'inside'));
  git(source, 'add', '-A');
  git(source, '-c', 'user.name=t', '-c', 'user.email=t@localhost', 'commit', '--quiet', '--no-verify', '-m', 'base');

  bare = path.join(parent, 'repos', 'owner__name.git');
  git(parent, 'clone', '--quiet', '--bare', source, bare);
  linked = path.join(parent, 'worktrees', 'linked');
  git(bare, 'worktree', 'add', '--quiet', '--detach', linked, 'main');
  plain = path.join(parent, 'clones', 'plain');
  git(parent, 'clone', '--quiet', source, plain);
  git(plain, 'remote', 'set-url', 'origin', `https://x-access-token:${urlToken}@example.invalid/owner/name.git`);
  await fs.symlink('.git', path.join(plain, 'gitlink'));
  // The attacks are only meaningful if the outside is really there and really named.
  expect(await fs.readFile(path.join(linked, '.git'), 'utf8')).toContain(bare);
  expect(await fs.readFile(path.join(plain, '.git', 'config'), 'utf8')).toContain(urlToken);
  expect(await fs.readFile(path.join(linked, 'links', 'out-file'), 'utf8')).toContain(secretToken);
}, 60_000);

afterAll(async () => {
  await fs.rm(parent, { recursive: true, force: true });
  await fs.rm(outsideFile, { force: true });
});

const checkouts = () => [
  { kind: 'linked worktree', root: linked },
  { kind: 'plain clone', root: plain },
];

describe('symlink texts through every pipeline shape: the outside is not reachable', () => {
  const probes = [
    "ls -l links | grep -o -e '-> .*'",
    "ls -l links | rg -r '$1' '^l.* -> (.*)$'",
    'ls -l links | tail -c 300',
    "ls -l links | grep -c -e 'secret.txt'",
    'ls -lsh links',
    'ls -l links',
    'ls -lR links',
    'cat links/inside links/out-file',
    "rg --hidden --no-ignore -e TOKEN -e 'SECRET'",
    'grep -r -e SECRET -e TOKEN links src',
    'find links -type f',
  ];
  it.each(probes.map((command) => ({ command })))('$command', async ({ command }) => {
    for (const { kind, root } of checkouts()) {
      const result = await runTool(root, 'terminal', { command });
      recordAttack('terminal', `${command} (${kind})`, shown(result).includes(secretToken) ? 'escaped' : 'contained');
      expectNothingOutside(`${command} in the ${kind}`, shown(result));
    }
  });

  it('answers the same whether the outside files exist or not (no oracle)', async () => {
    const before = await Promise.all(probes.map((command) => runTool(linked, 'terminal', { command })));
    const moved = `${outsideFile}.away`;
    await fs.rename(outsideFile, moved);
    await fs.rename(path.join(parent, 'secret.txt'), path.join(parent, 'secret.away'));
    try {
      const after = await Promise.all(probes.map((command) => runTool(linked, 'terminal', { command })));
      recordAttack('terminal', 'outside existence oracle through link listings', 'contained');
      expect(after).toEqual(before);
    } finally {
      await fs.rename(moved, outsideFile);
      await fs.rename(path.join(parent, 'secret.away'), path.join(parent, 'secret.txt'));
    }
  });

  it('read of each outward link gives nothing of the outside', async () => {
    for (const link of ['links/out-file', 'links/abs-out', 'links/evil\nname', 'links/long-target', 'links/out-dir/secret.py']) {
      const result = await runTool(linked, 'read', { path: link });
      recordAttack('read', `read ${JSON.stringify(link)}`, result.status === 'error' ? 'refused' : 'escaped');
      expect(result.status).toBe('error');
      expectNothingOutside(`read ${link}`, shown(result));
    }
  });
});

describe('the namespace alone: programs that follow links (flags the allowlist refuses) find nothing outside', () => {
  const stages = (program: string, ...args: string[]): Stage[] => [{ executable: findExecutable(program)!, args, program }];
  const followers: Array<[string, Stage[]]> = [
    ['cat links/out-file links/abs-out links/long-target', stages('cat', 'links/out-file', 'links/abs-out', 'links/long-target')],
    ['cat links/evil\\nname', stages('cat', 'links/evil\nname')],
    ['rg -L --hidden --no-ignore SECRET', stages('rg', '-L', '--hidden', '--no-ignore', '--no-config', 'SECRET')],
    [
      'rg -L --hidden --no-ignore gitdir|url (no .git exclusion)',
      stages('rg', '-L', '--hidden', '--no-ignore', '--no-config', '-e', 'gitdir', '-e', 'url', '-e', 'worktrees'),
    ],
    ['grep -R SECRET .', stages('grep', '-R', 'SECRET', '.')],
    ['find -L links -type f', stages('find', '-L', 'links', '-type', 'f')],
    ['find -L . -path ./.git/*', stages('find', '-L', '.', '-path', './.git/*')],
    ['ls -lL links', stages('ls', '-lL', 'links')],
    ['head links/out-dir/secret.py', stages('head', 'links/out-dir/secret.py')],
    ['cat .git .git/config .git/HEAD', stages('cat', '.git', '.git/config', '.git/HEAD')],
    ['cat /etc/hostname /proc/1/environ', stages('cat', '/etc/hostname', '/proc/1/environ')],
    ['ls -la / /tmp', stages('ls', '-la', '/', os.tmpdir())],
  ];
  it.each(followers)('%s', async (label, pipeline) => {
    for (const { kind, root } of checkouts()) {
      const chunks: Buffer[] = [];
      const run = await runPipeline(pipeline, {
        cwd: root,
        timeoutMs: 10_000,
        placement: toolPlacement(root),
        onStdout: (chunk) => (chunks.push(chunk), 'more'),
      });
      expect(run.stages[0]!.spawnError).toBeUndefined();
      const text = `${Buffer.concat(chunks).toString('utf8')}\n${run.stages.map((s) => s.stderr).join('\n')}`;
      recordAttack('namespace', `${label} (${kind})`, text.includes(secretToken) || text.includes(bare) ? 'escaped' : 'contained');
      expectNothingOutside(`${label} in the ${kind}`, text);
      if (label.startsWith('ls -la /')) expect(text).not.toMatch(/\bhome\b|\broot\b|\bvar\b|\bopt\b/);
    }
  });

  it('an inward link still works, and the exit code of a program is its own', async () => {
    const chunks: Buffer[] = [];
    const run = await runPipeline(stages('cat', 'links/inside'), {
      cwd: linked,
      timeoutMs: 10_000,
      placement: toolPlacement(linked),
      onStdout: (chunk) => (chunks.push(chunk), 'more'),
    });
    expect(Buffer.concat(chunks).toString()).toContain('def helper');
    expect(run.stages[0]).toMatchObject({ exitCode: 0, signal: null });
    const missing = await runPipeline(stages('cat', 'links/abs-out'), {
      cwd: linked,
      timeoutMs: 10_000,
      placement: toolPlacement(linked),
      onStdout: () => 'more',
    });
    expect(missing.stages[0]).toMatchObject({ exitCode: 1, signal: null });
    expect(missing.stages[0]!.stderr).toMatch(/No such file or directory/);
  });
});

describe("git's control data: nothing of .git is shown, through any glob precedence", () => {
  const overrides = [
    "rg --hidden --iglob '*' gitdir",
    "rg --hidden --iglob '*' -e url -e worktrees",
    "rg --hidden --glob '*' --iglob '.git' gitdir",
    "rg --hidden --iglob '.git/**' url",
    "rg --hidden --iglob '**' --glob '!src' url",
    "rg --hidden -g '!!.git' gitdir",
    "rg --hidden --no-ignore -g '*' -g '.git' url",
    'rg --hidden --no-ignore --no-ignore-vcs --files',
    "rg --hidden --iglob '.GIT' --iglob '*' gitdir",
    "grep -r --include='*' --include=.git -e gitdir -e url .",
    'grep -r --exclude-dir=src -e url -e worktrees .',
    "find . -path './.git/*'",
    "find . -depth -ipath '*git*'",
    "find . -maxdepth 3 -name '*' -print",
    'find . -name config',
    'ls -la .git',
    'cat gitlink/config',
    'cat .git/config',
    "ls -la | grep -e '.git'",
  ];
  it.each(overrides)('%s', async (command) => {
    for (const isolation of ['namespace', 'filter-only'] as const) {
      for (const { kind, root } of checkouts()) {
        const result = await runTool(root, 'terminal', { command }, { isolation });
        const text = shown(result);
        recordAttack(
          'terminal',
          `${command} (${kind}, ${isolation})`,
          text.includes(bare) || text.includes(urlToken) ? 'escaped' : 'contained',
        );
        expectNothingOutside(`${command} in the ${kind} (${isolation})`, text);
        expect(result.output).not.toMatch(/\.git\/(config|HEAD|refs|objects)/);
        // find's own walk never enters or lists .git, in either layer (the allowlist prunes it).
        if (command.startsWith('find')) expect(result.output).not.toMatch(/(^|\n)\.\/\.git(\/|\n|$)/);
      }
    }
  });

  it.each(ENGINES)('grep and glob tools show nothing of .git [%s]', async (engine) => {
    for (const { kind, root } of checkouts()) {
      for (const [tool, args] of [
        ['grep', { pattern: 'gitdir|url|worktrees' }],
        ['grep', { pattern: 'url', glob: '.git/**' }],
        ['grep', { pattern: 'url', glob: '**' }],
        ['glob', { pattern: '**' }],
        ['glob', { pattern: '.git/**' }],
        ['glob', { pattern: '**/config' }],
      ] as const) {
        const result = await runTool(root, tool, args, { engine });
        recordAttack(tool, `${JSON.stringify(args)} (${kind}) [${engine}]`, shown(result).includes(bare) ? 'escaped' : 'contained');
        expectNothingOutside(`${tool} ${JSON.stringify(args)} in the ${kind}`, shown(result));
        expect(result.output).not.toMatch(/(^|\n)\.git(\/|\n|$)/);
      }
    }
  });

  it('read of anything under .git answers exactly as a missing file does', async () => {
    const answer = async (root: string, p: string) =>
      (await runTool(root, 'read', { path: p })).message!.replace(JSON.stringify(p), 'PATH');
    for (const { kind, root } of checkouts()) {
      const missing = await answer(root, 'no-such-file.txt');
      expect(missing).toBe('read: no such file or directory: PATH');
      const paths = [
        '.git',
        '.git/config',
        '.git/HEAD',
        '.git/refs/heads/main',
        '.git/refs/heads/no-such-branch',
        '.git/config/x',
        '.GIT/config',
      ];
      if (kind === 'plain clone')
        paths.push('gitlink/config', 'gitlink/refs/heads/main', 'gitlink/refs/heads/no-such-branch', 'gitlink/config/x');
      for (const p of paths) {
        const got = await answer(root, p);
        recordAttack('read', `read ${p} (${kind}) answers as missing`, got === missing ? 'refused' : 'escaped');
        expect(got, `read ${p} in the ${kind}`).toBe(missing);
      }
      for (const command of ['cat .git/refs/heads/main', 'cat .git/refs/heads/no-such-branch', 'cat no-such-file.txt']) {
        const result = await runTool(root, 'terminal', { command });
        expect(result.message).toMatch(/^terminal: cat: no such file or directory: "[^"]+"\n/);
      }
    }
  });
});

describe('a machine without the namespace', () => {
  it('filter-only is an explicit choice; the tools still refuse the path escapes there', async () => {
    const result = await runTool(linked, 'read', { path: 'links/abs-out' }, { isolation: 'filter-only' });
    expect(result).toMatchObject({ status: 'error', message: expect.stringMatching(/through a symlink/) });
    const ok = await runTool(linked, 'read', { path: 'src/app.py' }, { isolation: 'filter-only' });
    expect(ok).toMatchObject({ status: 'ok', output: expect.stringContaining('def helper') });
  });
});

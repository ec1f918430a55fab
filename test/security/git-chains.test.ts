import { execFileSync } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runEditor } from '../../lib/downstream/agents/editor';
import { workspacePatch } from '../../lib/downstream/runs/workspace-patch';
import { hardenedGitArgs, hardenedGitEnv } from '../../lib/worktrees/git';
import { recordAttack } from './attack-log';

/**
 * Finding 1: code execution through the editor and git. Each chain of the issue is built for real (a bare
 * repository, a `git worktree add` checkout like the downstream runs use, and a plain repository with its
 * `.git` directory inside the checkout), then the project's own `workspacePatch` runs. A payload script
 * outside the checkout creates a marker file when any git key, hook or attribute runs it: the marker must
 * never appear, and the agent's real edit must still come back as a patch.
 */
const IDENTITY = ['-c', 'user.name=t', '-c', 'user.email=t@localhost', '-c', 'commit.gpgsign=false'];
let parent: string;
let marker: string;
let payload: string;

function sh(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
  });
}

async function plainRepo(name = 'plain'): Promise<{ root: string; base: string }> {
  const root = path.join(parent, name);
  await fs.mkdir(path.join(root, 'pkg'), { recursive: true });
  sh(parent, 'init', '--quiet', '--initial-branch=main', root);
  await fs.writeFile(path.join(root, 'pkg', 'mod.py'), 'a = 1\n');
  await fs.symlink('.git', path.join(root, 'gitlink'));
  await fs.symlink('.git/hooks', path.join(root, 'hooklink'));
  sh(root, 'add', '-A');
  sh(root, ...IDENTITY, 'commit', '--quiet', '--no-verify', '-m', 'base');
  return { root, base: sh(root, 'rev-parse', 'HEAD').trim() };
}

async function worktreeCheckout(): Promise<{ root: string; base: string; bare: string }> {
  const { root: source, base } = await plainRepo('source');
  const bare = path.join(parent, 'bare.git');
  sh(parent, 'clone', '--quiet', '--bare', source, bare);
  const root = path.join(parent, 'run', 'repo');
  sh(bare, 'worktree', 'add', '--quiet', '--detach', root, base);
  return { root, base, bare };
}

const edit = (root: string, args: Record<string, unknown>) => runEditor(root, args);

beforeEach(async () => {
  parent = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'codegrep-gitchain-')));
  marker = path.join(parent, 'PWNED');
  payload = path.join(parent, 'payload.sh');
  await fs.writeFile(payload, `#!/bin/sh\necho "$0 $*" >> '${marker}'\nexit 0\n`, { mode: 0o755 });
});
afterEach(async () => {
  await fs.rm(parent, { recursive: true, force: true });
});

async function expectPatchWithoutPayload(root: string, base: string): Promise<string> {
  expect((await edit(root, { command: 'str_replace', path: 'pkg/mod.py', old_str: 'a = 1', new_str: 'a = 2' })).status).toBe('ok');
  const patch = await workspacePatch(root, base);
  expect(existsSync(marker)).toBe(false);
  expect(patch).toContain('-a = 1\n+a = 2');
  return patch;
}

describe('finding 1: the editor cannot reach git control data', () => {
  it('create through a committed symlink to .git is refused (commondir, config, hooks, refs, alternates)', async () => {
    const { root } = await plainRepo();
    for (const target of [
      'gitlink/commondir',
      'gitlink/config.worktree',
      'gitlink/hooks/post-index-change',
      'gitlink/refs/heads/x',
      'gitlink/objects/info/alternates',
      'hooklink/pre-commit',
      'gitlink/info/attributes',
    ]) {
      const result = await edit(root, { command: 'create', path: target, file_text: `[core]\n\tfsmonitor = ${payload}\n` });
      recordAttack('editor', `create ${target} through a symlink to .git`, result.status === 'error' ? 'refused' : 'escaped');
      expect(result).toMatchObject({
        status: 'error',
        message: expect.stringMatching(/is a symlink; the editor never writes through symlinks/),
      });
    }
    expect(existsSync(path.join(root, '.git', 'commondir'))).toBe(false);
    expect(existsSync(path.join(root, '.git', 'hooks', 'post-index-change'))).toBe(false);
  });

  it('str_replace and insert through a symlink to .git are refused', async () => {
    const { root } = await plainRepo();
    const before = await fs.readFile(path.join(root, '.git', 'config'), 'utf8');
    for (const args of [
      { command: 'str_replace', path: 'gitlink/config', old_str: '[core]', new_str: `[core]\n\tfsmonitor = ${payload}` },
      { command: 'insert', path: 'gitlink/config', insert_line: 0, new_str: `[core]\n\tfsmonitor = ${payload}` },
      { command: 'str_replace', path: 'gitlink/HEAD', old_str: 'ref', new_str: 'xref' },
    ]) {
      const result = await edit(root, args);
      recordAttack('editor', `${args.command} ${args.path} through a symlink to .git`, result.status === 'error' ? 'refused' : 'escaped');
      expect(result.status).toBe('error');
    }
    expect(await fs.readFile(path.join(root, '.git', 'config'), 'utf8')).toBe(before);
  });

  it('a .git component anywhere in the path is refused, in any letter case and any spelling', async () => {
    const { root } = await plainRepo();
    for (const target of [
      'nested/.git/HEAD',
      'nested/.git/config',
      'pkg/.git',
      'a/b/.GIT/config',
      '.git/hooks/pre-commit',
      './.git/x',
      'pkg/../.git/config',
      `${root}/.git/hooks/post-index-change`,
      'pkg/.Git/hooks/x',
    ]) {
      const result = await edit(root, { command: 'create', path: target, file_text: 'x' });
      recordAttack('editor', `create ${target.replace(root, '<root>')}`, result.status === 'error' ? 'refused' : 'escaped');
      expect(result).toMatchObject({ status: 'error', message: expect.stringMatching(/inside \.git; refused/) });
    }
    expect(existsSync(path.join(root, 'nested'))).toBe(false);
    expect(existsSync(path.join(root, 'a'))).toBe(false);
  });

  it('a hard link to control data is not edited', async () => {
    const { root } = await plainRepo();
    await fs.link(path.join(root, '.git', 'config'), path.join(root, 'config-hardlink'));
    const result = await edit(root, { command: 'insert', path: 'config-hardlink', insert_line: 0, new_str: '[core]\n\tfsmonitor = x' });
    recordAttack('editor', 'insert into a hard link of .git/config', result.status === 'error' ? 'refused' : 'escaped');
    expect(result).toMatchObject({ status: 'error', message: expect.stringMatching(/other hard links/) });
  });
});

describe('finding 1: workspacePatch runs no program whatever the checkout holds', () => {
  it('control: an unhardened git add -A does run an fsmonitor payload (so the marker check is live)', async () => {
    const { root } = await plainRepo();
    sh(root, 'config', 'core.fsmonitor', payload);
    await fs.writeFile(path.join(root, 'pkg', 'mod.py'), 'a = 2\n');
    sh(root, 'add', '-A');
    expect(existsSync(marker)).toBe(true);
  });

  it('core.fsmonitor in the repository config does not run', async () => {
    const { root, base } = await worktreeCheckout();
    sh(root, 'config', 'core.fsmonitor', payload);
    recordAttack('git', 'core.fsmonitor in the repository config', 'contained');
    await expectPatchWithoutPayload(root, base);
  });

  it('hooks (post-index-change fires on git add) do not run, in hooks/ or in a configured core.hooksPath', async () => {
    const { root, base, bare } = await worktreeCheckout();
    for (const hook of ['post-index-change', 'pre-commit', 'post-checkout', 'reference-transaction']) {
      await fs.copyFile(payload, path.join(bare, 'hooks', hook));
      await fs.chmod(path.join(bare, 'hooks', hook), 0o755);
    }
    await fs.mkdir(path.join(parent, 'hooks2'));
    await fs.copyFile(payload, path.join(parent, 'hooks2', 'post-index-change'));
    sh(root, 'config', 'core.hooksPath', path.join(parent, 'hooks2'));
    recordAttack('git', 'hooks in hooks/ and core.hooksPath', 'contained');
    await expectPatchWithoutPayload(root, base);
  });

  it('diff.external, a textconv driver and GIT_EXTERNAL_DIFF in the environment do not run', async () => {
    const { root, base } = await worktreeCheckout();
    sh(root, 'config', 'diff.external', payload);
    sh(root, 'config', 'diff.evil.textconv', payload);
    sh(root, 'config', 'diff.evil.command', payload);
    expect((await edit(root, { command: 'create', path: '.gitattributes', file_text: '* diff=evil\n' })).status).toBe('ok');
    process.env.GIT_EXTERNAL_DIFF = payload;
    try {
      recordAttack('git', 'diff.external / textconv / GIT_EXTERNAL_DIFF', 'contained');
      await expectPatchWithoutPayload(root, base);
    } finally {
      delete process.env.GIT_EXTERNAL_DIFF;
    }
  });

  it('a filter named by an agent-written .gitattributes runs nothing: global and system config are ignored', async () => {
    const { root, base } = await worktreeCheckout();
    const globalConfig = path.join(parent, 'global.gitconfig');
    await fs.writeFile(
      globalConfig,
      `[filter "evil"]\n\tclean = ${payload}\n\tsmudge = ${payload}\n\tprocess = ${payload}\n[core]\n\tfsmonitor = ${payload}\n\tpager = ${payload}\n`,
    );
    const saved = { g: process.env.GIT_CONFIG_GLOBAL, p: process.env.GIT_CONFIG_PARAMETERS };
    process.env.GIT_CONFIG_GLOBAL = globalConfig;
    process.env.GIT_CONFIG_PARAMETERS = `'core.fsmonitor'='${payload}'`;
    try {
      expect((await edit(root, { command: 'create', path: '.gitattributes', file_text: '* filter=evil\n' })).status).toBe('ok');
      recordAttack('git', '.gitattributes filter with the driver in global config / GIT_CONFIG_PARAMETERS', 'contained');
      const patch = await expectPatchWithoutPayload(root, base);
      expect(patch).toContain('+* filter=evil');
    } finally {
      if (saved.g === undefined) delete process.env.GIT_CONFIG_GLOBAL;
      else process.env.GIT_CONFIG_GLOBAL = saved.g;
      if (saved.p === undefined) delete process.env.GIT_CONFIG_PARAMETERS;
      else process.env.GIT_CONFIG_PARAMETERS = saved.p;
    }
  });

  it('a nested .git with an fsmonitor config (as an outside agent could write) runs nothing and the patch keeps the files', async () => {
    const { root, base } = await worktreeCheckout();
    await fs.mkdir(path.join(root, 'nested', '.git', 'refs', 'heads'), { recursive: true });
    await fs.mkdir(path.join(root, 'nested', '.git', 'objects'), { recursive: true });
    await fs.writeFile(path.join(root, 'nested', '.git', 'HEAD'), 'ref: refs/heads/main\n');
    await fs.writeFile(path.join(root, 'nested', '.git', 'config'), `[core]\n\trepositoryformatversion = 0\n\tfsmonitor = ${payload}\n`);
    await fs.writeFile(path.join(root, 'nested', 'code.py'), 'print(1)\n');
    await fs.mkdir(path.join(root, 'deep', 'er'), { recursive: true });
    await fs.writeFile(path.join(root, 'deep', 'er', '.GIT'), 'gitdir: ../../nested/.git\n');
    recordAttack('git', 'nested .git repository with an fsmonitor config', 'contained');
    const patch = await expectPatchWithoutPayload(root, base);
    expect(patch).toContain('b/nested/code.py');
    expect(patch).not.toContain('.git/');
  });

  it('a checkout whose .git vanished never makes git find an enclosing repository', async () => {
    const { root: outer } = await plainRepo('outer');
    const inner = path.join(outer, 'inner');
    await fs.mkdir(inner);
    await fs.writeFile(path.join(inner, 'f.py'), 'x\n');
    recordAttack('git', 'checkout without .git inside another repository', 'contained');
    await expect(workspacePatch(inner, 'HEAD')).rejects.toThrow(/not a git repository/);
  });

  it('the hardened arguments and environment carry every neutraliser', () => {
    const args = hardenedGitArgs(['status']);
    for (const kv of ['core.fsmonitor=false', 'core.hooksPath=/dev/null', 'protocol.allow=never', 'credential.helper='])
      expect(args).toContain(kv);
    expect(args[0]).toBe('--no-pager');
    expect(args.at(-1)).toBe('status');
    const env = hardenedGitEnv('/x/y/checkout');
    expect(env).toMatchObject({
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_CEILING_DIRECTORIES: '/x/y',
      GIT_SSH_COMMAND: 'false',
      GIT_PAGER: 'cat',
      GIT_EDITOR: 'true',
    });
    expect(
      Object.keys(env).filter(
        (k) =>
          k.startsWith('GIT_') &&
          !(
            k in
            {
              GIT_CONFIG_NOSYSTEM: 1,
              GIT_CONFIG_SYSTEM: 1,
              GIT_CONFIG_GLOBAL: 1,
              GIT_CEILING_DIRECTORIES: 1,
              GIT_TERMINAL_PROMPT: 1,
              GIT_ASKPASS: 1,
              GIT_SSH_COMMAND: 1,
              GIT_PAGER: 1,
              GIT_EDITOR: 1,
              GIT_SEQUENCE_EDITOR: 1,
              GIT_LFS_SKIP_SMUDGE: 1,
              GIT_OPTIONAL_LOCKS: 1,
            }
          ),
      ),
    ).toEqual([]);
  });
});

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ToolResult } from '../../schemas/tools';
import { findExecutable } from '../../lib/sandbox/executables';
import { probeNamespace } from '../../lib/sandbox/namespace';
import { runTool } from '../../lib/sandbox/run-tool';
import { runPipeline, toolPlacement, type Stage } from '../../lib/sandbox/subprocess';
import { recordAttack } from './attack-log';

/**
 * Escapes through `/proc` (README, Security): `/proc/<pid>/root` and `/proc/<pid>/cwd` are links the kernel
 * resolves to another process's root and working directory, so on the host `/proc/1/root/<file>` reaches any
 * file of the machine whatever the caller's own root. The tools refuse such paths (read, grep, glob, the
 * terminal's path guard), and the namespace (lib/sandbox/namespace.ts: a new PID namespace with its own
 * `/proc`) must hold even when those filters are bypassed: `sh` run directly inside it sees only the
 * sandbox's processes, whose root is the sandbox. A secret file is made outside the worktree, under a name
 * only this test knows, and must never be shown.
 */
let parent: string;
let worktree: string;
let secretFile: string;
let secretToken: string;
/** The random part of the secret file's name: no command below names it, so a listing that shows it escaped. */
let secretNameTag: string;

const shown = (r: ToolResult) => `${r.output}\n${r.message ?? ''}`;

beforeAll(async () => {
  expect(await probeNamespace()).toMatchObject({ ok: true });
  parent = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'codegrep-proc-escape-')));
  secretToken = `PROC-SECRET-${randomBytes(8).toString('hex')}`;
  // Outside the worktree and outside its parent: only a path through the host's root reaches it.
  secretNameTag = randomBytes(6).toString('hex');
  secretFile = path.join(os.tmpdir(), `codegrep-proc-secret-${secretNameTag}.txt`);
  await fs.writeFile(secretFile, `${secretToken}\n`);
  worktree = path.join(parent, 'repo');
  await fs.mkdir(path.join(worktree, 'src'), { recursive: true });
  await fs.writeFile(path.join(worktree, 'src', 'app.py'), 'def helper():\n    return 1\n');
  const env = { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };
  execFileSync('git', ['init', '--quiet', '--initial-branch=main', worktree], { env });
  execFileSync('git', ['add', '-A'], { cwd: worktree, env });
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@localhost', 'commit', '--quiet', '--no-verify', '-m', 'base'], {
    cwd: worktree,
    env,
  });
  // The attack is only meaningful if the host really reaches the secret this way.
  expect(await fs.readFile(`/proc/self/root${secretFile}`, 'utf8')).toContain(secretToken);
}, 60_000);

afterAll(async () => {
  await fs.rm(parent, { recursive: true, force: true });
  await fs.rm(secretFile, { force: true });
});

/** The `/proc` routes to the secret, absolute and climbing out of the worktree. */
const routes = () => {
  const climb = '../'.repeat(worktree.split('/').length + 2);
  return [
    `/proc/1/root${secretFile}`,
    `/proc/self/root${secretFile}`,
    `/proc/1/cwd/..${'/..'.repeat(8)}${secretFile}`,
    `${climb}proc/1/root${secretFile}`,
    `${climb}proc/self/root${secretFile}`,
  ];
};

describe('the tools refuse /proc routes out of the worktree', () => {
  it('read', async () => {
    for (const route of routes()) {
      const result = await runTool(worktree, 'read', { path: route });
      recordAttack('read', `read ${route}`, shown(result).includes(secretToken) ? 'escaped' : 'refused');
      expect(result.status, route).toBe('error');
      expect(shown(result)).not.toContain(secretToken);
    }
  });

  it('grep', async () => {
    for (const route of [...routes(), '/proc/1/root/tmp', '/proc/self/root/tmp', '/proc/1/cwd/..']) {
      const result = await runTool(worktree, 'grep', { pattern: 'PROC-SECRET', path: route });
      recordAttack('grep', `grep PROC-SECRET ${route}`, shown(result).includes(secretToken) ? 'escaped' : 'refused');
      expect(shown(result)).not.toContain(secretToken);
    }
  });

  it('glob', async () => {
    const patterns = [
      '/proc/1/root/tmp/codegrep-proc-secret-*',
      '/proc/self/root/tmp/*.txt',
      'proc/1/root/**/codegrep-proc-secret-*',
      '../../../../proc/1/cwd/../**/codegrep-proc-secret-*',
      '/proc/*/root/tmp/*',
    ];
    for (const pattern of patterns) {
      const result = await runTool(worktree, 'glob', { pattern });
      recordAttack('glob', `glob ${pattern}`, shown(result).includes(secretNameTag) ? 'escaped' : 'refused');
      expect(shown(result), pattern).not.toContain(secretNameTag);
    }
  });

  it('terminal', async () => {
    // Commands that name the secret file must not show its contents; listings (which do not name it) not even its name.
    const reads = [...routes().map((route) => `cat ${route}`), `cat /proc/1/cwd/../../../../..${secretFile}`];
    const listings = [
      'ls -la /proc/1/root/tmp',
      `ls -la /proc/self/root${path.dirname(secretFile)}`,
      'ls -la /proc/1/cwd/..',
      'grep -r PROC-SECRET /proc/1/root/tmp',
      "find /proc/1/root/tmp -name '*.txt'",
      'rg -l PROC-SECRET /proc/self/root/tmp',
    ];
    for (const command of [...reads, ...listings]) {
      const result = await runTool(worktree, 'terminal', { command });
      const text = shown(result);
      const escaped = text.includes(secretToken) || (listings.includes(command) && text.includes(secretNameTag));
      recordAttack('terminal', command, escaped ? 'escaped' : 'contained');
      expect(text, command).not.toContain(secretToken);
      if (listings.includes(command)) expect(text, command).not.toContain(secretNameTag);
    }
  });
});

describe('the namespace alone: sh run directly inside it (no allowlist, no path guard) cannot reach the host through /proc', () => {
  const sh = (script: string): Stage[] => [{ executable: findExecutable('sh')!, args: ['-c', script], program: 'sh' }];

  async function inNamespace(script: string): Promise<{ text: string; exitCode: number | null }> {
    const chunks: Buffer[] = [];
    const run = await runPipeline(sh(script), {
      cwd: worktree,
      timeoutMs: 10_000,
      placement: toolPlacement(worktree),
      onStdout: (chunk) => (chunks.push(chunk), 'more'),
    });
    expect(run.stages[0]!.spawnError).toBeUndefined();
    return { text: `${Buffer.concat(chunks).toString('utf8')}\n${run.stages[0]!.stderr}`, exitCode: run.stages[0]!.exitCode };
  }

  it('runs at all: the script prints its marker and sees the worktree', async () => {
    const { text, exitCode } = await inNamespace('echo marker-$((6*7)); cat src/app.py');
    expect(text).toContain('marker-42');
    expect(text).toContain('def helper');
    expect(exitCode).toBe(0);
  });

  it.each([
    ['cat /proc/1/root/<secret>', (f: string) => `cat /proc/1/root${f}`],
    ['cat /proc/self/root/<secret>', (f: string) => `cat /proc/self/root${f}`],
    ['cat /proc/1/cwd/../…/<secret>', (f: string) => `cat /proc/1/cwd/../../../../../../../..${f}`],
    [
      'every /proc/<pid>/root and cwd it can see',
      (f: string) => `for p in /proc/[0-9]*; do cat "$p/root${f}" "$p/cwd/../../../../../../..${f}"; done`,
    ],
  ])('%s', async (label, script) => {
    const { text } = await inNamespace(`${script(secretFile)} 2>&1; echo done`);
    recordAttack('namespace', `sh -c ${label}`, text.includes(secretToken) ? 'escaped' : 'contained');
    expect(text).toContain('done');
    expect(text).toContain('No such file or directory');
    expect(text).not.toContain(secretToken);
  });

  it.each([
    [
      'ls of the host tmp through /proc/1/root, /proc/self/root and /proc/1/cwd',
      'ls -la /proc/1/root/tmp /proc/self/root/tmp /proc/1/cwd/../../../../../../../tmp',
    ],
    [
      'grep -r and find over the host tmp through /proc',
      'grep -r PROC-SECRET /proc/1/root/tmp /proc/self/root/tmp; find /proc/*/root/tmp /proc/*/cwd/../../../../../../../tmp',
    ],
  ])('%s', async (label, script) => {
    const { text } = await inNamespace(`${script} 2>&1; echo done`);
    recordAttack('namespace', `sh -c ${label}`, text.includes(secretToken) || text.includes(secretNameTag) ? 'escaped' : 'contained');
    expect(text).toContain('done');
    expect(text).not.toContain(secretToken);
    expect(text).not.toContain(secretNameTag);
  });

  it("its /proc holds only the sandbox: a handful of processes, pid 1 is bwrap's, and its root is the sandbox's", async () => {
    const { text } = await inNamespace('ls /proc | grep -c "^[0-9]"; head -c 15 /proc/1/cmdline; echo; ls /proc/1/root/');
    const [count, init, ...root] = text.trim().split('\n');
    // bwrap's init, the shell and its children: never the host's hundreds of processes.
    expect(Number(count)).toBeGreaterThan(0);
    expect(Number(count)).toBeLessThan(10);
    expect(init).toMatch(/bwrap/);
    // The sandbox's root: the system dirs bound read-only, its own /proc, /dev and /tmp, and the worktree's path.
    expect(root.filter((entry) => entry !== '').sort()).toEqual(expect.arrayContaining(['dev', 'proc', 'tmp', 'usr']));
    for (const entry of root) expect(['bin', 'dev', 'etc', 'lib', 'lib64', 'proc', 'sbin', 'tmp', 'usr', '']).toContain(entry);
  });
});

import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { findExecutable } from './executables';
import { decodeNamespaceExit, describeToolIsolation, namespaceArgs, namespaceSetupFailure, probeNamespace } from './namespace';

function worktree(kind: 'linked' | 'clone'): string {
  const root = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'ns-test-')));
  writeFileSync(path.join(root, 'inside.txt'), 'inside\n');
  symlinkSync('/etc/hostname', path.join(root, 'outward'));
  if (kind === 'linked') writeFileSync(path.join(root, '.git'), 'gitdir: /secret/bare.git/worktrees/x\n');
  else {
    mkdirSync(path.join(root, '.git'));
    writeFileSync(path.join(root, '.git', 'config'), '[remote "origin"]\n\turl = https://token@example.invalid/x.git\n');
  }
  return root;
}

function run(root: string, writable: boolean, program: string, ...args: string[]) {
  const executable = findExecutable(program)!;
  return spawnSync('bwrap', [...namespaceArgs({ root, writable }, root, [executable]), executable, ...args], { encoding: 'utf8' });
}

describe('the tool namespace', async () => {
  const probe = await probeNamespace();
  it('is available on this machine (bubblewrap, as CI installs it)', () => {
    expect(probe).toMatchObject({ ok: true });
  });

  it('holds the worktree and nothing else: outward links resolve to nothing, .git is empty', () => {
    for (const kind of ['linked', 'clone'] as const) {
      const root = worktree(kind);
      expect(run(root, false, 'cat', 'inside.txt').stdout).toBe('inside\n');
      const outward = run(root, false, 'cat', 'outward');
      expect(outward.status).not.toBe(0);
      expect(outward.stdout).toBe('');
      // The top level holds the system dirs, the kernel's views, /tmp and the worktree's first path component.
      const topLevel = run(root, false, 'ls', '-A', '/').stdout.split('\n').filter(Boolean);
      expect(
        topLevel.filter((name) => !['usr', 'bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32', 'etc', 'proc', 'dev', 'tmp'].includes(name)),
      ).toEqual([]);
      expect(run(root, false, 'ls', '-A', os.tmpdir()).stdout.trim()).toBe(path.basename(root));
      expect(run(root, false, 'cat', '/etc/hostname').status).not.toBe(0);
      if (kind === 'linked') expect(run(root, false, 'cat', '.git').stdout).toBe('');
      else expect(run(root, false, 'find', '.git').stdout.trim()).toBe('.git');
    }
  });

  it('is read-only for the retrieval tools and writable for the editor', () => {
    const root = worktree('linked');
    expect(run(root, false, 'touch', 'new.txt').status).not.toBe(0);
    expect(run(root, true, 'touch', 'new.txt').status).toBe(0);
    expect(execFileSync('ls', [root], { encoding: 'utf8' })).toContain('new.txt');
  });

  it('reads back a signal from bwrap exit code 128 + N', () => {
    expect(decodeNamespaceExit(152, null)).toEqual({ exitCode: null, signal: 'SIGXCPU' });
    expect(decodeNamespaceExit(1, null)).toEqual({ exitCode: 1, signal: null });
    expect(decodeNamespaceExit(null, 'SIGKILL')).toEqual({ exitCode: null, signal: 'SIGKILL' });
  });

  it('refuses a working directory outside the worktree', () => {
    expect(() => namespaceArgs({ root: '/tmp/a', writable: false }, '/tmp')).toThrow(/outside the worktree/);
  });
});

describe('bwrap setup failures and the start-up line', () => {
  it("reads bwrap's own failure as a start failure, never as the program's exit code 1", () => {
    expect(namespaceSetupFailure(1, "bwrap: Can't find source path /x: No such file or directory\n")).toMatch(
      /^the sandbox could not start: bwrap: Can't find source path/,
    );
    expect(namespaceSetupFailure(1, 'grep: x: No such file or directory\n')).toBeUndefined();
    expect(namespaceSetupFailure(0, 'bwrap: ...')).toBeUndefined();
  });

  it('says isolated, or NOT isolated with the reason and the switch', () => {
    expect(describeToolIsolation({ ok: true, bwrap: '/usr/bin/bwrap' })).toMatch(/^agent tools: isolated /);
    expect(describeToolIsolation({ ok: false, reason: 'bubblewrap (bwrap) is not installed' })).toMatch(
      /^agent tools: NOT isolated: bubblewrap \(bwrap\) is not installed\. .*sandbox\.isolation: "filter-only"/,
    );
  });
});

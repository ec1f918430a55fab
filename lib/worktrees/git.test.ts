import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { git, runGit } from './git';

describe('git output past the 64 MiB cap', () => {
  let repo: string;
  beforeAll(() => {
    repo = mkdtempSync(path.join(os.tmpdir(), 'codegrep-git-cap-'));
    const run = (...args: string[]) => execFileSync('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@t', ...args]);
    run('init', '-q');
    writeFileSync(path.join(repo, 'small.txt'), 'small\n');
    // 65 MiB of zeros: cheap to store (zlib), one MiB over the cap when printed.
    writeFileSync(path.join(repo, 'big.bin'), Buffer.alloc(65 * 1024 * 1024));
    run('add', '.');
    run('commit', '-q', '-m', 'big');
  });
  afterAll(() => rmSync(repo, { recursive: true, force: true }));

  it('is never returned cut: git() refuses it by name, runGit() says it was cut', async () => {
    expect(await git(['-C', repo, 'cat-file', 'blob', 'HEAD:small.txt'], { timeoutMs: 60_000 })).toBe('small\n');
    await expect(git(['-C', repo, 'cat-file', 'blob', 'HEAD:big.bin'], { timeoutMs: 60_000 })).rejects.toThrow(/output over 64 MiB/);
    const cut = await runGit(['-C', repo, 'cat-file', 'blob', 'HEAD:big.bin'], { timeoutMs: 60_000 });
    expect(cut.stdoutTruncated).toBe(true);
    expect(cut.code).toBe(0);
  }, 60_000);
});

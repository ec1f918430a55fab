import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runTool } from '../../lib/sandbox/run-tool';

/**
 * Symlink chains: every hop but the last stays inside the worktree, so a check of the first hop's target alone
 * ("links to a path inside the root") passes; only resolving the whole chain shows that it ends outside. The
 * read, grep and glob tools and the terminal must refuse or skip each chain and never print the secret; a
 * chain that ends inside the root stays readable (the control).
 */
let parent: string;
let root: string;
const secret = `CHAINED-SECRET-${process.pid}-${Date.now()}`;

beforeAll(async () => {
  parent = await fs.mkdtemp(path.join(os.tmpdir(), 'codegrep-chained-links-'));
  root = path.join(parent, 'repo');
  await fs.mkdir(path.join(root, 'src', 'deep'), { recursive: true });
  await fs.writeFile(path.join(parent, 'secret.txt'), `${secret}\n`);
  await fs.writeFile(path.join(root, 'src', 'app.py'), 'def main():\n    return 1\n');
  // File chain: hop1 -> src/hop2 -> ../../secret.txt (the last hop leaves the root).
  await fs.symlink('src/hop2', path.join(root, 'hop1'));
  await fs.symlink('../../secret.txt', path.join(root, 'src', 'hop2'));
  // Directory chain: dirhop -> src/deep/up -> ../../.. (the parent of the root), then secret.txt under it.
  await fs.symlink('src/deep/up', path.join(root, 'dirhop'));
  await fs.symlink('../../..', path.join(root, 'src', 'deep', 'up'));
  // Control: a chain that ends inside the root.
  await fs.symlink('src/inner', path.join(root, 'okhop'));
  await fs.symlink('app.py', path.join(root, 'src', 'inner'));
});
afterAll(async () => {
  await fs.rm(parent, { recursive: true, force: true });
});

const run = (tool: string, args: unknown) => runTool(root, tool, args);

describe('symlink chains that leave the worktree on their last hop', () => {
  it('read refuses both chains and never shows the secret; an all-inside chain is read', async () => {
    for (const target of ['hop1', 'src/hop2', 'dirhop/secret.txt', 'src/deep/up/secret.txt']) {
      const result = await run('read', { path: target });
      expect(result.status, target).not.toBe('ok');
      expect(JSON.stringify(result), target).not.toContain(secret);
    }
    const control = await run('read', { path: 'okhop' });
    expect(control.status).toBe('ok');
    expect(control.output).toContain('def main');
  });

  it('grep and glob neither follow a chain out nor print the secret', async () => {
    for (const args of [{ pattern: 'CHAINED-SECRET' }, { pattern: 'CHAINED', path: 'dirhop' }, { pattern: 'CHAINED', path: 'hop1' }]) {
      const result = await run('grep', args);
      expect(JSON.stringify(result), JSON.stringify(args)).not.toContain(secret);
    }
    for (const pattern of ['**/secret.txt', 'dirhop/**', 'src/deep/up/*']) {
      const result = await run('glob', { pattern });
      expect(JSON.stringify(result), pattern).not.toContain(secret);
      // Only the echo of the pattern may name secret.txt: no listed path does.
      expect(result.output, pattern).toMatch(/^No files match/);
    }
  });

  it('the terminal cannot cat, head or grep through the chains', async () => {
    expect((await run('terminal', { command: 'cat okhop' })).output).toContain('def main'); // control
    for (const command of ['cat hop1', 'head -n 1 dirhop/secret.txt', 'grep -R CHAINED .', 'rg -L CHAINED', 'cat src/deep/up/secret.txt']) {
      const result = await run('terminal', { command });
      expect(JSON.stringify(result), command).not.toContain(secret);
      if (command.startsWith('cat') || command.startsWith('head'))
        expect(result.message, command).toMatch(/outside the repository root; refused/);
    }
  });
});

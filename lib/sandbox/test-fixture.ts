import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * A real worktree-shaped tree for the sandbox tests, inside a temporary parent that also holds files the
 * sandbox must never reveal: `secretToken` is written only outside the root (and reachable from inside only
 * through symlinks that point out), so any output containing it proves an escape.
 */
export interface SandboxFixture {
  parent: string;
  root: string;
  secretToken: string;
  cleanup(): Promise<void>;
}

export const APP_PY = [
  'import os',
  '',
  'class App:',
  '    def run(self):',
  '        return helper(os.getcwd())',
  '',
  'def helper(path):',
  '    return path.upper()',
  '',
].join('\n');

export async function makeSandboxFixture(options: { sparseGigabyte?: boolean; manyMatches?: number } = {}): Promise<SandboxFixture> {
  const parent = await fs.mkdtemp(path.join(os.tmpdir(), 'codegrep-sandbox-'));
  const root = path.join(parent, 'repo');
  const secretToken = `SECRET-TOKEN-${randomBytes(8).toString('hex')}`;
  const write = async (relative: string, content: string | Buffer) => {
    const file = path.join(root, relative);
    await fs.mkdir(path.dirname(file), { recursive: true });
    await fs.writeFile(file, content);
  };

  await fs.writeFile(path.join(parent, 'secret.txt'), `${secretToken}\n`);
  await fs.mkdir(path.join(parent, 'outside'), { recursive: true });
  await fs.writeFile(path.join(parent, 'outside', 'secret.py'), `TOKEN = "${secretToken}"\n`);

  await write('README.md', '# Demo repository\n');
  await write('src/app.py', APP_PY);
  await write('src/util/__init__.py', '');
  await write('src/util/helpers.py', 'def helper_two():\n    return 2\n\ndef helper_three():\n    return 3\n');
  await write('src/util.txt', 'sorts after the src/util directory\n');
  await write('tests/test_app.py', 'from src.app import helper\n\ndef test_helper():\n    assert helper("a") == "A"\n');
  await write('docs/guide.md', 'Use helper() to shout.\n');
  await write('.hidden/config.yml', 'helper: true\n');
  await write('.git', 'gitdir: /nonexistent/worktrees/repo\n');
  await write('data/blob.bin', Buffer.from([0x68, 0x65, 0x6c, 0x70, 0x65, 0x72, 0x00, 0x01, 0x02, 0x0a]));
  await write('lines.txt', Array.from({ length: 500 }, (_, k) => `line ${k + 1}`).join('\n') + '\n');
  await write('crlf.txt', 'first\r\nsecond\r\n');
  await write('minified.js', `var a="${'x'.repeat(100_000)}";function helper(){}\n`);
  await write('-e', 'a file whose name looks like a flag\n');
  await write('catastrophic.txt', `${'a'.repeat(48)}xb\n`);
  if (options.manyMatches) {
    await write('many.txt', Array.from({ length: options.manyMatches }, (_, k) => `needle ${k}`).join('\n') + '\n');
  }
  if (options.sparseGigabyte) {
    const handle = await fs.open(path.join(root, 'sparse.bin'), 'w');
    await handle.truncate(1024 ** 3);
    await handle.close();
  }

  await fs.mkdir(path.join(root, 'links'), { recursive: true });
  await fs.symlink('../../secret.txt', path.join(root, 'links', 'out-file'));
  await fs.symlink(path.join(parent, 'secret.txt'), path.join(root, 'links', 'abs-out'));
  await fs.symlink('../../outside', path.join(root, 'links', 'out-dir'));
  await fs.symlink('loop-b', path.join(root, 'links', 'loop-a'));
  await fs.symlink('loop-a', path.join(root, 'links', 'loop-b'));
  await fs.symlink('/proc/self/environ', path.join(root, 'links', 'environ'));
  await fs.symlink('../src/app.py', path.join(root, 'links', 'inside'));
  execFileSync('mkfifo', [path.join(root, 'fifo')]);

  return { parent, root, secretToken, cleanup: () => fs.rm(parent, { recursive: true, force: true }) };
}

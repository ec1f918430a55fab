import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../../test/python/run-bm25-reference';
import { retrieveTopK } from './retriever';
import { collectWorktreeFiles, indexWorktree } from './worktree';

/** A worktree laid out like a real repository, filled with real SWE-bench text. */
const rows = readFileSync(path.resolve(REPO_ROOT, '../shared/data/swebench_verified.jsonl'), 'utf8')
  .split('\n')
  .filter((l) => l.trim() !== '')
  .slice(0, 40)
  .map((l) => JSON.parse(l) as { instance_id: string; patch: string; problem_statement: string });

let root: string;
const write = (relative: string, content: string | Buffer): void => {
  const absolute = path.join(root, relative);
  mkdirSync(path.dirname(absolute), { recursive: true });
  writeFileSync(absolute, content);
};

beforeAll(() => {
  root = mkdtempSync(path.join(tmpdir(), 'bm25-worktree-'));
  const text = (i: number): string => rows[i]!.patch;
  write('pkg/core.py', text(0));
  write('pkg/sub/models.py', text(1));
  write('pkg/env_utils.py', text(2)); // a file named like a skipped directory is still indexed
  write('environment/settings.py', text(3)); // so is a directory that only starts like one
  write('setup.py', text(4));
  write('tests/test_core.py', text(5));
  write('test/test_other.py', text(6));
  write('pkg/tests/test_deep.py', text(7));
  for (const skipped of ['__pycache__', 'venv', '.venv', 'env', 'build', 'dist', '.eggs', '.git']) {
    write(`${skipped}/hidden.py`, text(8));
    write(`pkg/${skipped}/nested.py`, text(9));
  }
  write('docs/index.rst', text(10));
  write('README.md', text(11));
  write('pkg/data.pyc', text(12));
  write('pkg/blob.py', Buffer.concat([Buffer.from('MAGIC'), Buffer.from([0, 1, 2]), Buffer.from(text(13))]));
  write('pkg/big.py', 'x = 1\n'.repeat(5000));
  symlinkSync(path.join(root, 'pkg/core.py'), path.join(root, 'link.py'));
  symlinkSync(path.join(root, 'pkg'), path.join(root, 'pkg_link'));
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('indexWorktree (App. E "Corpus")', () => {
  it('indexes Python files, tests included, skipping the App. E directories at any depth, in path order', async () => {
    const { files, skipped } = await collectWorktreeFiles(root, { maxFileBytes: 20_000 });
    expect(files.map((f) => f.path)).toEqual([
      'environment/settings.py',
      'pkg/core.py',
      'pkg/env_utils.py',
      'pkg/sub/models.py',
      'pkg/tests/test_deep.py',
      'setup.py',
      'test/test_other.py',
      'tests/test_core.py',
    ]);
    expect(files[1]!.content).toBe(rows[0]!.patch);
    expect(skipped).toEqual([
      { path: 'link.py', reason: 'symlink' },
      { path: 'pkg/big.py', reason: 'too-large', detail: '30000 bytes > 20000' },
      { path: 'pkg/blob.py', reason: 'binary' },
    ]);
  });

  it('skips tests/ and test/ directories when tests are excluded', async () => {
    const { files } = await collectWorktreeFiles(root, { includeTests: false, maxFileBytes: 20_000 });
    expect(files.map((f) => f.path)).toEqual([
      'environment/settings.py',
      'pkg/core.py',
      'pkg/env_utils.py',
      'pkg/sub/models.py',
      'setup.py',
    ]);
  });

  it('builds an index that retrieves a file from its own text', async () => {
    const index = await indexWorktree(root);
    expect(index.paths).toContain('pkg/big.py'); // under the default 2 MiB limit
    expect(index.root).toBe(await import('node:fs/promises').then((fs) => fs.realpath(root)));
    const query = rows[1]!.patch;
    expect(retrieveTopK(index, query, 1)[0]!.path).toBe('pkg/sub/models.py');
  });

  it('fails with the root named when the root does not exist', async () => {
    await expect(indexWorktree(path.join(root, 'missing'))).rejects.toThrow(/cannot open worktree root .*missing/);
  });
});

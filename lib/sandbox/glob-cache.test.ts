import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { glob } from './glob';
import { globListingCache } from './glob-cache';
import { sortPaths } from './glob-match';

let root: string;

/** A tree is stamped only once every directory is older than the cache's 2 s racy margin. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 2_300));

async function write(relative: string): Promise<void> {
  await fs.mkdir(path.dirname(path.join(root, relative)), { recursive: true });
  await fs.writeFile(path.join(root, relative), 'x = 1\n');
}

async function listed(pattern = '**/*.py', signal?: AbortSignal): Promise<string[]> {
  const result = await glob(root, { pattern }, { engine: 'rg', ...(signal ? { signal } : {}) });
  if (result.status !== 'ok') throw new Error(`glob ${pattern}: ${result.status} ${result.message ?? ''} ${result.output}`);
  return result.output.startsWith('No files match') ? [] : result.output.split('\n');
}

/** Caches the listing (a miss that is stored, then a hit) on a settled tree. */
async function cached(expected: string[]): Promise<void> {
  await settle();
  const before = { ...globListingCache.stats };
  expect(await listed()).toEqual(sortPaths([...expected]));
  expect(await listed()).toEqual(sortPaths([...expected]));
  expect(globListingCache.stats.hits).toBeGreaterThan(before.hits);
}

beforeAll(async () => {
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'codegrep-globcache-')));
  for (const f of ['a/x.py', 'a/b/y.py', 'c/w.py', 'c/z.txt', '.git/HEAD']) await write(f);
  await fs.mkdir(path.join(root, 'd'));
  globListingCache.clear();
});
afterAll(() => fs.rm(root, { recursive: true, force: true }));

describe('glob listing cache: never answers from a listing the tree no longer has', () => {
  it('answers a repeated glob from the cache while the tree is unchanged; .git does not count', async () => {
    await cached(['a/x.py', 'a/b/y.py', 'c/w.py']);
    const hits = globListingCache.stats.hits;
    await fs.writeFile(path.join(root, '.git', 'index'), 'changed');
    expect(await listed()).toEqual(sortPaths(['a/x.py', 'a/b/y.py', 'c/w.py']));
    expect(globListingCache.stats.hits).toBe(hits + 1);
  });

  it('sees a new file in a directory it knew', async () => {
    await cached(['a/x.py', 'a/b/y.py', 'c/w.py']);
    await write('a/new.py');
    expect(await listed()).toEqual(sortPaths(['a/new.py', 'a/x.py', 'a/b/y.py', 'c/w.py']));
  });

  it('sees a file in new directories under an empty one', async () => {
    await cached(['a/new.py', 'a/x.py', 'a/b/y.py', 'c/w.py']);
    await write('d/e/f/deep.py');
    expect(await listed()).toEqual(sortPaths(['a/new.py', 'a/x.py', 'a/b/y.py', 'c/w.py', 'd/e/f/deep.py']));
  });

  it('sees a deleted file and a renamed directory', async () => {
    await cached(['a/new.py', 'a/x.py', 'a/b/y.py', 'c/w.py', 'd/e/f/deep.py']);
    await fs.rm(path.join(root, 'a/b/y.py'));
    expect(await listed()).toEqual(sortPaths(['a/new.py', 'a/x.py', 'c/w.py', 'd/e/f/deep.py']));
    await cached(['a/new.py', 'a/x.py', 'c/w.py', 'd/e/f/deep.py']);
    await fs.rename(path.join(root, 'd/e'), path.join(root, 'd/g'));
    expect(await listed()).toEqual(sortPaths(['a/new.py', 'a/x.py', 'c/w.py', 'd/g/f/deep.py']));
  });

  it('sees a file replaced by a symlink (ripgrep lists no symlinks)', async () => {
    await cached(['a/new.py', 'a/x.py', 'c/w.py', 'd/g/f/deep.py']);
    await fs.symlink('../a/x.py', path.join(root, 'c/tmp-link'));
    await fs.rename(path.join(root, 'c/tmp-link'), path.join(root, 'c/w.py'));
    expect(await listed()).toEqual(sortPaths(['a/new.py', 'a/x.py', 'd/g/f/deep.py']));
  });

  it('sees a new file even when the directory’s mtime is set back (its ctime cannot be)', async () => {
    await cached(['a/new.py', 'a/x.py', 'd/g/f/deep.py']);
    const dir = path.join(root, 'a');
    const { mtimeNs } = await fs.stat(dir, { bigint: true });
    await write('a/sneaky.py');
    // touch restores the mtime to the nanosecond (fs.utimes would round it, which alone would show).
    const at = `@${mtimeNs / 1_000_000_000n}.${String(mtimeNs % 1_000_000_000n).padStart(9, '0')}`;
    execFileSync('touch', ['-m', '-d', at, dir]);
    expect((await fs.stat(dir, { bigint: true })).mtimeNs).toBe(mtimeNs);
    expect(await listed()).toEqual(sortPaths(['a/new.py', 'a/sneaky.py', 'a/x.py', 'd/g/f/deep.py']));
  });

  it('never stamps a tree changed within the racy margin: such a listing is not kept', async () => {
    await write('young/file.py');
    const stored = globListingCache.stats.stored;
    const hits = globListingCache.stats.hits;
    expect(await listed('young/*.py')).toEqual(sortPaths(['young/file.py']));
    expect(await listed('young/*.py')).toEqual(sortPaths(['young/file.py']));
    expect(globListingCache.stats.stored).toBe(stored);
    expect(globListingCache.stats.hits).toBe(hits);
  });
});

describe('glob listing cache: concurrent calls', () => {
  it('share one ripgrep run per pattern, and one caller’s abort cancels only that caller', async () => {
    await settle();
    const shared = globListingCache.stats.shared;
    const controller = new AbortController();
    const calls = Array.from({ length: 20 }, (_, k) =>
      glob(root, { pattern: '**/*.txt' }, { engine: 'rg', ...(k === 0 ? { signal: controller.signal } : {}) }),
    );
    controller.abort();
    const results = await Promise.all(calls);
    expect(results[0]).toMatchObject({ status: 'error', message: 'glob was cancelled' });
    for (const result of results.slice(1)) expect(result).toEqual({ status: 'ok', output: 'c/z.txt' });
    expect(globListingCache.stats.shared).toBeGreaterThanOrEqual(shared + 18);
  });
});

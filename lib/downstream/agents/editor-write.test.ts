import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { chooseWriter } from './editor-write';

describe('chooseWriter', () => {
  it('refuses namespace writes with the reason and the switch when the sandbox is unavailable', async () => {
    const choice = await chooseWriter('namespace', async () => ({ ok: false, reason: 'bubblewrap (bwrap) is not installed' }));
    expect(choice).toEqual({
      ok: false,
      message: expect.stringMatching(
        /the editor cannot write: its OS sandbox is unavailable \(bubblewrap \(bwrap\) is not installed\).*sandbox\.isolation: 'filter-only'/,
      ),
    });
    // filter-only never asks.
    expect((await chooseWriter('filter-only', () => Promise.reject(new Error('not asked')))).ok).toBe(true);
  });

  it('writes inside the namespace: a create refuses an existing path, a replace swaps the file whole', async () => {
    const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'editor-write-')));
    try {
      const choice = await chooseWriter('namespace');
      if (!choice.ok) throw new Error(choice.message);
      expect(await choice.writer.create(root, 'a/b/-dash.txt', 'one\n')).toEqual({ ok: true });
      expect(await fs.readFile(path.join(root, 'a/b/-dash.txt'), 'utf8')).toBe('one\n');
      expect(await choice.writer.create(root, 'a/b/-dash.txt', 'two\n')).toMatchObject({
        ok: false,
        message: expect.stringMatching(/cannot create a\/b\/-dash\.txt/),
      });
      const inode = (await fs.stat(path.join(root, 'a/b/-dash.txt'))).ino;
      expect(await choice.writer.replace(root, 'a/b/-dash.txt', 'three $(touch pwned) "$1"\n', 0o600)).toEqual({ ok: true });
      const after = await fs.stat(path.join(root, 'a/b/-dash.txt'));
      expect(after.ino).not.toBe(inode);
      expect(after.mode & 0o777).toBe(0o600);
      expect(await fs.readFile(path.join(root, 'a/b/-dash.txt'), 'utf8')).toBe('three $(touch pwned) "$1"\n');
      expect((await fs.readdir(path.join(root, 'a/b'))).sort()).toEqual(['-dash.txt']);
      // A path is an argument of a fixed script, never shell code.
      expect(await choice.writer.create(root, '$(touch pwned); `id` "q".txt', 'x')).toEqual({ ok: true });
      expect((await fs.readdir(root)).sort()).toEqual(['$(touch pwned); `id` "q".txt', 'a']);
    } finally {
      await fs.rm(root, { recursive: true, force: true });
    }
  });
});

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobReader, listTree, readBlobs } from './cat-file';
import { git } from './git';
import { bareMirror, commitFiles } from './synthetic-repo';

let root: string;
let bare: string;
let commit: string;
const files: Record<string, string> = {
  'a.py': 'print(1)\n',
  'big/large.py': 'x = "0123456789abcdef"\n'.repeat(20_000), // 460 KB: many pipe chunks
  'empty.py': '',
  'dir with space/ü.py': 'def ü(): pass\n',
};

beforeAll(async () => {
  root = mkdtempSync(path.join(tmpdir(), 'cat-file-'));
  await git(['init', '--quiet', '--initial-branch=main', path.join(root, 'work')], { timeoutMs: 30_000 });
  commit = await commitFiles(path.join(root, 'work'), files, 'files');
  bare = await bareMirror(path.join(root, 'work'), path.join(root, 'bare.git'));
}, 60_000);
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('listTree and BlobReader (git cat-file --batch)', () => {
  it('lists every file with its blob and size, and reads blobs pipelined, in order, across chunk boundaries', async () => {
    const entries = await listTree(bare, commit);
    expect(entries.map((e) => e.path).sort()).toEqual(Object.keys(files).sort());
    for (const e of entries) expect(e.size).toBe(Buffer.byteLength(files[e.path]!));
    const reader = new BlobReader(bare);
    try {
      const oids = [...entries, ...entries, ...entries].map((e) => e.oid);
      const seen: string[] = [];
      await readBlobs(
        reader,
        oids,
        (oid, content, i) => {
          expect(oid).toBe(oids[i]);
          seen.push(content!.toString('utf8'));
        },
        5,
      );
      expect(seen).toEqual([...entries, ...entries, ...entries].map((e) => files[e.path]));
      expect(await reader.read('0'.repeat(40))).toBeNull();
      expect(await reader.read(entries[0]!.oid)).toEqual(Buffer.from(files[entries[0]!.path]!));
      await expect(reader.read('not-an-oid')).rejects.toThrow(/not an object id/);
    } finally {
      await reader.close();
    }
    await expect(reader.read(entries[0]!.oid)).rejects.toThrow(/cat-file --batch .* exited/);
  });
});

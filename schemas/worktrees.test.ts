import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readParquetObjects, readParquetTable, writeParquetArtifact } from '../lib/artifacts';
import {
  RepoSourceSchema,
  treeKey,
  WORKTREES_SCHEMA_NAME,
  WORKTREES_SCHEMA_VERSION,
  WorktreeResultSchema,
  worktreesArrowSchema,
  type WorktreeResult,
} from './worktrees';

const rows: WorktreeResult[] = [
  {
    repo: 'acme/widgets',
    commit: 'a'.repeat(40),
    path: '/w/acme__widgets/' + 'a'.repeat(40),
    status: 'created',
    ms: 12.5,
    bytes: 4096,
    error: null,
    errorCode: null,
    bugPatchSha256: null,
    patchedFrom: null,
  },
  {
    repo: 'acme/widgets',
    commit: 'c'.repeat(40),
    path: '/w/acme__widgets/' + 'c'.repeat(40),
    status: 'reused',
    ms: 3.25,
    bytes: 4096,
    error: null,
    errorCode: null,
    bugPatchSha256: null,
    patchedFrom: null,
  },
  {
    repo: 'acme/absent',
    commit: 'b'.repeat(40),
    path: '',
    status: 'failed',
    ms: 0.5,
    bytes: 0,
    error: 'no local mirror of acme/absent',
    errorCode: 'mirror-missing',
    bugPatchSha256: null,
    patchedFrom: null,
  },
];

describe('worktrees schema', () => {
  it('declares every column type explicitly and names itself in the metadata', () => {
    expect(WORKTREES_SCHEMA_NAME).toBe('worktrees');
    expect(WORKTREES_SCHEMA_VERSION).toBe(2);
    expect(worktreesArrowSchema.metadata.get('schemaName')).toBe('worktrees');
    expect(worktreesArrowSchema.metadata.get('schemaVersion')).toBe('2');
    expect(worktreesArrowSchema.fields.map((f) => [f.name, String(f.type), f.nullable])).toEqual([
      ['repo', 'Utf8', false],
      ['commit', 'Utf8', false],
      ['path', 'Utf8', false],
      ['status', 'Utf8', false],
      ['ms', 'Float64', false],
      ['bytes', 'Float64', false],
      ['error', 'Utf8', true],
      ['errorCode', 'Utf8', true],
      ['bugPatchSha256', 'Utf8', true],
      ['patchedFrom', 'Utf8', true],
    ]);
  });

  it('holds result rows through a Parquet artifact round trip', async () => {
    const dir = await fs.mkdtemp(path.join(tmpdir(), 'codegrep-wt-schema-'));
    try {
      const uri = path.join(dir, 'worktrees.parquet');
      const ref = await writeParquetArtifact({
        path: uri,
        schemaName: WORKTREES_SCHEMA_NAME,
        schemaVersion: WORKTREES_SCHEMA_VERSION,
        arrowSchema: worktreesArrowSchema,
        rows,
        inputs: [],
        configHash: 'f'.repeat(64),
      });
      expect(ref).toMatchObject({ rows: 3, schema: 'worktrees', schemaVersion: 2 });
      const table = await readParquetTable(uri);
      expect(table.schema.fields.map((f) => String(f.type))).toEqual([
        'Utf8',
        'Utf8',
        'Utf8',
        'Utf8',
        'Float64',
        'Float64',
        'Utf8',
        'Utf8',
        'Utf8',
        'Utf8',
      ]);
      expect((await readParquetObjects(uri)).map((r) => WorktreeResultSchema.parse(r))).toEqual(rows);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('refuses malformed rows and sources', () => {
    expect(() => WorktreeResultSchema.parse({ ...rows[0], status: 'done' })).toThrow();
    expect(() => WorktreeResultSchema.parse({ ...rows[0], ms: -1 })).toThrow();
    expect(() => WorktreeResultSchema.parse({ ...rows[0], error: undefined })).toThrow();
    expect(RepoSourceSchema.safeParse({ kind: 'url', template: 'https://example.com/x.git' }).success).toBe(false);
    expect(RepoSourceSchema.safeParse({ kind: 'url', template: 'https://h/{owner}/{name}.git' }).success).toBe(true);
    expect(RepoSourceSchema.safeParse({ kind: 'mirror-dir', dir: '' }).success).toBe(false);
    expect(RepoSourceSchema.safeParse({ kind: 'ftp', dir: '/x' }).success).toBe(false);
  });
});

describe('treeKey: the identity of a requested tree', () => {
  it('is repo@commit for a commit (row or sample alike) and repo@HEAD+sha256 for a use_patch tree', () => {
    const sha = 'f'.repeat(64);
    expect(treeKey({ repo: 'a/b', commit: 'c'.repeat(40) })).toBe(`a/b@${'c'.repeat(40)}`);
    expect(treeKey({ repo: 'a/b', baseCommit: 'c'.repeat(40), bugPatchSha256: null })).toBe(`a/b@${'c'.repeat(40)}`);
    expect(treeKey({ repo: 'a/b', baseCommit: 'd'.repeat(40) })).not.toBe(treeKey({ repo: 'a/b', baseCommit: 'c'.repeat(40) }));
    // A use_patch sample (no commit yet) and its worktree row (the patched commit) name the same tree.
    expect(treeKey({ repo: 'a/b', baseCommit: null, bugPatchSha256: sha })).toBe(`a/b@HEAD+${sha}`);
    expect(treeKey({ repo: 'a/b', commit: 'e'.repeat(40), bugPatchSha256: sha })).toBe(`a/b@HEAD+${sha}`);
  });
});

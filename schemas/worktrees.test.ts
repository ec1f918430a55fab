import { Float64, RecordBatch, Table, Utf8, makeData, Struct, tableFromIPC, tableToIPC, vectorFromArray } from 'apache-arrow';
import { describe, expect, it } from 'vitest';
import {
  RepoSourceSchema,
  WORKTREES_SCHEMA_NAME,
  WORKTREES_SCHEMA_VERSION,
  WorktreeResultSchema,
  worktreesArrowSchema,
  type WorktreeResult,
} from './worktrees';

const rows: WorktreeResult[] = [
  { repo: 'acme/widgets', commit: 'a'.repeat(40), path: '/w/acme__widgets/' + 'a'.repeat(40), status: 'created', ms: 12.5, bytes: 4096, error: null },
  { repo: 'acme/absent', commit: 'b'.repeat(40), path: '', status: 'failed', ms: 0.25, bytes: 0, error: 'no local mirror of acme/absent' },
];

describe('worktrees schema', () => {
  it('names itself and its version in the Arrow metadata', () => {
    expect(WORKTREES_SCHEMA_NAME).toBe('worktrees');
    expect(WORKTREES_SCHEMA_VERSION).toBe(1);
    expect(worktreesArrowSchema.metadata.get('schemaName')).toBe('worktrees');
    expect(worktreesArrowSchema.metadata.get('schemaVersion')).toBe('1');
    expect(worktreesArrowSchema.fields.map((f) => [f.name, String(f.type), f.nullable])).toEqual([
      ['repo', 'Utf8', false],
      ['commit', 'Utf8', false],
      ['path', 'Utf8', false],
      ['status', 'Utf8', false],
      ['ms', 'Float64', false],
      ['bytes', 'Float64', false],
      ['error', 'Utf8', true],
    ]);
  });

  it('holds result rows through an Arrow IPC round trip', () => {
    const children = worktreesArrowSchema.fields.map((f) =>
      vectorFromArray(
        rows.map((r) => r[f.name as keyof WorktreeResult]),
        f.type as Utf8 | Float64,
      ).data[0]!,
    );
    const data = makeData({ type: new Struct(worktreesArrowSchema.fields), length: rows.length, nullCount: 0, children });
    const table = tableFromIPC(tableToIPC(new Table(new RecordBatch(worktreesArrowSchema, data))));
    expect(table.schema.metadata.get('schemaName')).toBe('worktrees');
    const back = table.toArray().map((r) => WorktreeResultSchema.parse({ ...r.toJSON() }));
    expect(back).toEqual(rows);
  });

  it('refuses malformed rows and sources', () => {
    expect(() => WorktreeResultSchema.parse({ ...rows[0], status: 'done' })).toThrow();
    expect(() => WorktreeResultSchema.parse({ ...rows[0], ms: -1 })).toThrow();
    expect(RepoSourceSchema.safeParse({ kind: 'url', template: 'https://example.com/x.git' }).success).toBe(false);
    expect(RepoSourceSchema.safeParse({ kind: 'url', template: 'https://h/{owner}/{name}.git' }).success).toBe(true);
    expect(RepoSourceSchema.safeParse({ kind: 'mirror-dir', dir: '' }).success).toBe(false);
  });
});

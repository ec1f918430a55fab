import { z } from 'zod';
import type { RowRecord } from './rows';

/**
 * One SWE-bench-style instance (layout of shared/data/swebench_verified.jsonl and swebench_lite.jsonl, the
 * five columns kept there): the issue, the repository at its base commit, and the gold patch.
 */
export const INSTANCE_ROW_FIELDS = ['instance_id', 'repo', 'base_commit', 'problem_statement', 'patch', 'file_changes'] as const;
export type InstanceRowField = (typeof INSTANCE_ROW_FIELDS)[number];

/**
 * CodeScout's public instance layout adds, per changed file, the entities the gold patch edits and adds:
 * `file_changes: [{ file, changes: { edited_entities, edited_modules, added_entities, added_modules } }]`
 * (entities `file.py:Class.method` / `file.py:func`, modules `file.py:Class`). Only `edited_*` are localization
 * targets (an agent cannot find what does not exist yet); `added_*` is read and ignored.
 */
export const FileChangeSchema = z.object({
  file: z.string().min(1),
  changes: z
    .object({
      edited_entities: z.array(z.string()).default([]),
      edited_modules: z.array(z.string()).default([]),
      added_entities: z.array(z.string()).optional(),
      added_modules: z.array(z.string()).optional(),
    })
    .prefault({}),
});
export type FileChange = z.infer<typeof FileChangeSchema>;

export const InstanceRowSchema = z.object({
  instance_id: z.string().min(1, 'must be a non-empty string'),
  repo: z.string().regex(/^[^/\s]+\/[^/\s]+$/, 'expected "owner/name"'),
  base_commit: z.string().regex(/^[0-9a-f]{40}$/, 'expected a full 40-hex-digit commit id'),
  problem_statement: z.string(),
  patch: z.string().min(1, 'must be a non-empty unified diff'),
  /** CodeScout layout only (see FileChangeSchema); absent in SWE-bench rows. */
  file_changes: z.array(FileChangeSchema).nullish(),
});
export type InstanceRow = z.infer<typeof InstanceRowSchema>;

export type InstanceRowResult =
  | { ok: true; instance: InstanceRow }
  /** `field` is null when the row as a whole is unreadable (bad JSON, not an object). */
  | { ok: false; ordinal: number; field: InstanceRowField | null; message: string };

/**
 * Checks one streamed record. The message names the row ordinal and the first bad column (in column order), e.g.
 * `instances row 12: column base_commit: expected a full 40-hex-digit commit id (got "abc")`.
 */
export function parseInstanceRecord(record: RowRecord, source = 'instances'): InstanceRowResult {
  if ('error' in record)
    return { ok: false, ordinal: record.ordinal, field: null, message: `${source} row ${record.ordinal}: ${record.error}` };
  const parsed = InstanceRowSchema.safeParse(record.row);
  if (parsed.success) return { ok: true, instance: parsed.data };
  const rootIssue = parsed.error.issues.find((issue) => issue.path.length === 0);
  if (rootIssue !== undefined) {
    return { ok: false, ordinal: record.ordinal, field: null, message: `${source} row ${record.ordinal}: ${rootIssue.message}` };
  }
  const byField = new Map(parsed.error.issues.map((issue) => [String(issue.path[0]), issue]));
  const field = INSTANCE_ROW_FIELDS.find((f) => byField.has(f))!;
  const value = (record.row as Record<string, unknown>)[field];
  const got = value === undefined ? 'missing' : `got ${describe(value)}`;
  return {
    ok: false,
    ordinal: record.ordinal,
    field,
    message: `${source} row ${record.ordinal}: column ${field}: ${byField.get(field)!.message} (${got})`,
  };
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (value === null) return 'null';
  return Array.isArray(value) ? 'an array' : typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

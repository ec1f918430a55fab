import { z } from 'zod';
import type { RowRecord } from './rows';

/**
 * One SWE-bench-style instance (layout of shared/data/swebench_verified.jsonl and swebench_lite.jsonl, the
 * five columns kept there): the issue, the repository at its base commit, and the gold patch.
 */
export const INSTANCE_ROW_FIELDS = [
  'instance_id',
  'repo',
  'base_commit',
  'problem_statement',
  'patch',
  'file_changes',
  'use_patch',
  'prompt',
] as const;
export type InstanceRowField = (typeof INSTANCE_ROW_FIELDS)[number];

/**
 * CodeScout's public instance layout adds, per changed file, the entities the gold patch edits and adds:
 * `file_changes: [{ file, changes: { edited_entities, edited_modules, added_entities, added_modules } }]`
 * (entities `file.py:Class.method` / `file.py:func`, modules `file.py:Class`). Only `edited_*` are localization
 * targets (an agent cannot find what does not exist yet); `added_*` is read and ignored.
 */
/** A list CodeScout's Parquet files may hold as null (pandas writes an empty list of a column as None). */
const nullableList = z
  .array(z.string())
  .nullish()
  .transform((v) => v ?? []);

export const FileChangeSchema = z.object({
  file: z.string().min(1),
  changes: z
    .object({
      edited_entities: nullableList,
      edited_modules: nullableList,
      added_entities: z.array(z.string()).nullish(),
      added_modules: z.array(z.string()).nullish(),
    })
    .nullish()
    .transform((v) => v ?? { edited_entities: [], edited_modules: [] }),
});
export type FileChange = z.infer<typeof FileChangeSchema>;

/** One chat message of CodeScout's `prompt` column (`[{role: 'user', content: problem_statement}]`). */
export const PromptMessageSchema = z.object({ role: z.string(), content: z.string() });

const FULL_COMMIT = /^[0-9a-f]{40}$/;

export const InstanceRowSchema = z
  .object({
    instance_id: z.string().min(1, 'must be a non-empty string'),
    repo: z.string().regex(/^[^/\s]+\/[^/\s]+$/, 'expected "owner/name"'),
    /** Null only with `use_patch: true` (the tree is the repository's head plus `patch`). */
    base_commit: z.string().nullish(),
    problem_statement: z.string().nullish(),
    patch: z.string().min(1, 'must be a non-empty unified diff'),
    /** CodeScout layout only (see FileChangeSchema); absent in SWE-bench rows. */
    file_changes: z.array(FileChangeSchema).nullish(),
    /**
     * CodeScout's SWE-Smith rows (its src/build_dataset.py `--use_patch`): the repository
     * `swesmith/<owner>__<repo>.<commit8>` is taken at its head and `patch` is applied to it, which
     * introduces the bug; `base_commit` is null. `file_changes` then names what the fix has to touch.
     */
    use_patch: z.boolean().nullish(),
    /** CodeScout's chat prompt; its user messages are the problem statement the agent sees. */
    prompt: z.array(PromptMessageSchema).nullish(),
  })
  .superRefine((row, ctx) => {
    if (row.use_patch === true) {
      if (row.base_commit !== null && row.base_commit !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['base_commit'],
          message: 'must be null with use_patch: true (the patch is applied to the repository head, as CodeScout does)',
        });
    } else if (typeof row.base_commit !== 'string' || !FULL_COMMIT.test(row.base_commit)) {
      ctx.addIssue({
        code: 'custom',
        path: ['base_commit'],
        message: 'expected a full 40-hex-digit commit id (null only with use_patch: true)',
      });
    }
    if (problemStatementOf(row) === null)
      ctx.addIssue({ code: 'custom', path: ['problem_statement'], message: 'expected a string, or a prompt with a user message' });
  });
export type InstanceRow = z.infer<typeof InstanceRowSchema>;

/**
 * The task text of an instance: the user messages of CodeScout's `prompt` when there is one (what its agent
 * is shown), else `problem_statement`; null when neither is there.
 */
export function problemStatementOf(row: Pick<InstanceRow, 'prompt' | 'problem_statement'>): string | null {
  const user = (row.prompt ?? []).filter((m) => m.role === 'user').map((m) => m.content);
  if (user.length > 0) return user.join('\n\n');
  return typeof row.problem_statement === 'string' ? row.problem_statement : null;
}

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

import type { Field } from 'apache-arrow';
import { z } from 'zod';
import { columns, int32, list, struct, utf8 } from './columns';

/**
 * Ground truth derived from a gold patch (docs/design.md "Ground truth from patches"; CodeScout §3.1). These are the
 * columns a samples artifact gains; bump the version whenever a column or its meaning changes.
 */
export const GROUND_TRUTH_SCHEMA_VERSION = 1;

export const GoldLineRangeSchema = z
  .object({
    path: z.string().min(1),
    start: z.number().int().positive(),
    end: z.number().int().positive(),
  })
  .refine((r) => r.end >= r.start, { message: 'line range end must be >= start' });
export type GoldLineRange = z.infer<typeof GoldLineRangeSchema>;

export const PreImageErrorSchema = z.object({ path: z.string().min(1), message: z.string().min(1) });
export type PreImageError = z.infer<typeof PreImageErrorSchema>;

export const GroundTruthSchema = z.object({
  /** Changed files, repo-relative, patch order; renames by pre-image path, added/copied files by new path. */
  files: z.array(z.string().min(1)),
  /** Whole-hunk pre-image ranges (context included), 1-based inclusive: CodeGrep's gold line ranges. */
  lineRanges: z.array(GoldLineRangeSchema),
  /** Pre-image lines actually removed/replaced (pure insertions by git's anchor line), merged. */
  changedLineRanges: z.array(GoldLineRangeSchema),
  /** `file.py:Class` (CodeScout modules). */
  modules: z.array(z.string().min(1)),
  /** `file.py:Class.method` / `file.py:func` (CodeScout functions). */
  functions: z.array(z.string().min(1)),
  /** Files the patch creates (added or copied): no agent can name them from the pre-image. */
  newFiles: z.array(z.string().min(1)),
  deletedFiles: z.array(z.string().min(1)),
  /** Files whose pre-image was missing or did not match the patch: header ranges kept, no entities derived. */
  preImageErrors: z.array(PreImageErrorSchema),
});
export type GroundTruth = z.infer<typeof GroundTruthSchema>;

/** Arrow column name for each ground-truth field, as the samples artifact stores them. */
export const GROUND_TRUTH_COLUMNS = {
  files: 'gold_files',
  lineRanges: 'gold_line_ranges',
  changedLineRanges: 'gold_changed_line_ranges',
  modules: 'gold_modules',
  functions: 'gold_functions',
  newFiles: 'gold_new_files',
  deletedFiles: 'gold_deleted_files',
  preImageErrors: 'gold_pre_image_errors',
} as const satisfies Record<keyof GroundTruth, string>;

const lineRangeStruct = () => struct({ path: utf8(), start: int32(), end: int32() }, GoldLineRangeSchema);
const { shape } = GroundTruthSchema;

/** The ground-truth columns (all non-null lists; empty list when nothing applies), zod from GroundTruthSchema. */
export const groundTruthColumns = columns({
  gold_files: list(utf8(), shape.files),
  gold_line_ranges: list(lineRangeStruct(), shape.lineRanges),
  gold_changed_line_ranges: list(lineRangeStruct(), shape.changedLineRanges),
  gold_modules: list(utf8(), shape.modules),
  gold_functions: list(utf8(), shape.functions),
  gold_new_files: list(utf8(), shape.newFiles),
  gold_deleted_files: list(utf8(), shape.deletedFiles),
  gold_pre_image_errors: list(struct({ path: utf8(), message: utf8() }, PreImageErrorSchema), shape.preImageErrors),
} satisfies { [K in keyof GroundTruth as (typeof GROUND_TRUTH_COLUMNS)[K]]: unknown });

/** Arrow fields for the ground-truth columns, in GROUND_TRUTH_COLUMNS order. */
export function groundTruthArrowFields(): Field[] {
  return groundTruthColumns.fields();
}

export type GroundTruthColumns = { [K in keyof GroundTruth as (typeof GROUND_TRUTH_COLUMNS)[K]]: GroundTruth[K] };

/** One row's ground-truth columns, keyed by Arrow column name. */
export function groundTruthToColumns(truth: GroundTruth): GroundTruthColumns {
  const row = {} as Record<string, unknown>;
  for (const key of Object.keys(GROUND_TRUTH_COLUMNS) as (keyof GroundTruth)[]) row[GROUND_TRUTH_COLUMNS[key]] = truth[key];
  return row as GroundTruthColumns;
}

/** Ground truth from a plain row keyed by Arrow column name (as lib/artifacts' Parquet readers return rows). */
export function groundTruthFromColumns(row: Record<string, unknown>): GroundTruth {
  const truth = {} as Record<string, unknown>;
  for (const key of Object.keys(GROUND_TRUTH_COLUMNS) as (keyof GroundTruth)[]) {
    const column = GROUND_TRUTH_COLUMNS[key];
    if (!(column in row)) throw new Error(`ground-truth row is missing column ${column}`);
    truth[key] = row[column];
  }
  const parsed = GroundTruthSchema.safeParse(truth);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const [key, ...rest] = issue.path;
    const column = GROUND_TRUTH_COLUMNS[key as keyof GroundTruth] ?? String(key);
    throw new Error(`ground-truth column ${[column, ...rest].join('.')}: ${issue.message}`);
  }
  return parsed.data;
}

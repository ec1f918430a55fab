/**
 * How the chaos suite (bench/chaos.ts) compares a trial's artifacts with its two uninterrupted references, in the
 * parts a unit test pins (bench/chaos-compare.test.ts): the fields that vary between the references, and the
 * segment split of a training run's metrics.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { readParquetObjects } from '../lib/artifacts';

export type Row = Record<string, unknown>;

/** A Parquet file's rows as plain JSON values (64-bit integers as numbers). */
export async function parquetRows(file: string): Promise<Row[]> {
  return (await readParquetObjects(file)).map(
    (r) => JSON.parse(JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? Number(v) : v))) as Row,
  );
}

/** Drops, at every depth, the fields whose values differ between the two references (varying by design). */
export function stable(value: unknown, refA: unknown, refB: unknown): unknown {
  if (Array.isArray(value) && Array.isArray(refA) && Array.isArray(refB)) {
    // A list of names whose order differs between the references (PEFT writes `target_modules` from a Python set): a set.
    const sorted = (list: unknown[]) => JSON.stringify(list.map((v) => JSON.stringify(v)).sort());
    if (JSON.stringify(refA) !== JSON.stringify(refB) && sorted(refA) === sorted(refB)) return JSON.parse(sorted(value)) as unknown;
    // An element (a report's line, a list's number) that differs between the references is left out.
    const varies = (i: number) => typeof refA[i] !== 'object' && JSON.stringify(refA[i]) !== JSON.stringify(refB[i]);
    return value.flatMap((v, i) => (varies(i) ? [] : [stable(v, refA[i], refB[i])]));
  }
  if (value && typeof value === 'object' && refA && typeof refA === 'object' && refB && typeof refB === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const a = (refA as Row)[k];
      const b = (refB as Row)[k];
      if (JSON.stringify(a) !== JSON.stringify(b) && (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null)) continue;
      out[k] = stable(v, a, b);
    }
    return out;
  }
  return value;
}

/** Removes `keys` (dotted paths) from an object, or from every row of a table. */
export function dropKeys(value: unknown, keys: string[]): unknown {
  if (Array.isArray(value)) return value.map((row) => dropKeys(row, keys)); // a table: the fields of every row
  if (!value || typeof value !== 'object') return value;
  const copy = JSON.parse(JSON.stringify(value)) as Row;
  for (const key of keys) {
    const parts = key.split('.');
    let at: Row | undefined = copy;
    for (const part of parts.slice(0, -1)) at = at?.[part] as Row | undefined;
    if (at) delete at[parts.at(-1)!];
  }
  return copy;
}

/**
 * Which steps of a training run land in which segment's metrics file depends on timing, by design: a segment
 * stops its trainer with SIGTERM once the trainer reports the segment's target step (lib/training/run-trainer.ts),
 * and a fast trainer may finish the next step before the signal lands; the workflow then validates every due step
 * the segment passed and plans the next segment from the step reached (workflows/training-run.ts). So two
 * uninterrupted runs may split the same steps differently (one segment of steps 1–2, or two of one step each), and
 * a killed run may too. What a user relies on is the run's steps: every step once across the segments' files, with
 * the reference's rows (training/metrics.parquet merges them; lib/training/layout.ts), not how they are split.
 */
export interface SegmentSplit {
  /** The segments' metrics files, relative to the artifact folder (their manifests go with them). */
  segmentFile: RegExp;
  /** How the comparison names the segments' files together. */
  label: string;
  /** The merged file (relative to the artifact folder) whose manifest lists the segments' files as its inputs. */
  merged: string;
  /** Row fields that say where a step was recorded (its segment, attempt and stdout line), not what it measured. */
  recordedAt: string[];
}

/** Training's metrics (lib/training/layout.ts): `metrics/segment-NNNN.parquet` per segment, merged into `metrics.parquet`. */
export const TRAINING_METRICS_SPLIT: SegmentSplit = {
  segmentFile: /^metrics\/segment-\d+\.parquet$/,
  label: 'metrics/segment-*.parquet',
  merged: 'metrics.parquet',
  recordedAt: ['segment', 'attempt', 'line'],
};

const MANIFEST = /\.manifest\.json$/;

/** Whether `file` (relative to the artifact folder) is a segment's metrics file or its manifest. */
export function isSegmentFile(split: SegmentSplit, file: string): boolean {
  return split.segmentFile.test(file.replace(MANIFEST, ''));
}

/** The segment file an input of the merged manifest names (its URI ends with that relative path), or null. */
function segmentOfInput(split: SegmentSplit, input: unknown): string | null {
  const uri = input && typeof input === 'object' ? (input as Row).uri : undefined;
  if (typeof uri !== 'string') return null;
  const parts = uri.split('/');
  for (let i = parts.length - 1; i >= 0; i--) {
    const relative = parts.slice(i).join('/');
    if (split.segmentFile.test(relative)) return relative;
  }
  return null;
}

/** The merged file's manifest without the inputs that are segment files: those are checked by compareSegmentSplit. */
export function withoutSegmentInputs(split: SegmentSplit, manifest: unknown): unknown {
  if (!manifest || typeof manifest !== 'object' || !Array.isArray((manifest as Row).inputs)) return manifest;
  const inputs = ((manifest as Row).inputs as unknown[]).filter((input) => segmentOfInput(split, input) === null);
  return { ...(manifest as Row), inputs };
}

export interface SegmentSplitComparison {
  /** The union of the segments' rows is the reference's, each step once, and every file's manifest agrees with it. */
  same: boolean;
  /** The segment files of the trial and of the first reference (the split itself, which may differ by design). */
  trialSegments: string[];
  referenceSegments: string[];
  /** Steps recorded in more than one of the trial's segment files. */
  stepsTwice: number[];
  /** Manifests that do not describe their file, and a merged manifest whose inputs are not the segment files. */
  problems: string[];
  /** The first rows of the union (by step) whose fields differ from the reference's. */
  rowDiffs: unknown[];
}

function segmentFiles(split: SegmentSplit, dir: string): string[] {
  if (!existsSync(dir)) return [];
  return (readdirSync(dir, { recursive: true }) as string[])
    .map((f) => f.split(path.sep).join('/'))
    .filter((f) => split.segmentFile.test(f))
    .sort();
}

const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

function readJson(file: string): Row | null {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Row;
  } catch {
    return null;
  }
}

async function unionOfSegments(dir: string, files: string[]): Promise<Row[]> {
  const rows: Row[] = [];
  for (const file of files) rows.push(...(await parquetRows(path.join(dir, file))));
  return rows.sort((a, b) => Number(a.step) - Number(b.step));
}

/**
 * Compares the trial's segment metrics files with the references' as one table (see SegmentSplit): the union of
 * their rows, sorted by step and without the fields that say where a row was recorded, must equal the first
 * reference's (fields that vary between the two references left out); no step may be in two files; each file's
 * manifest must give its sha256 and row count; the merged file's manifest must list exactly the trial's segment files.
 */
export async function compareSegmentSplit(
  split: SegmentSplit,
  trialDir: string,
  refADir: string,
  refBDir: string,
): Promise<SegmentSplitComparison> {
  const trialSegments = segmentFiles(split, trialDir);
  const referenceSegments = segmentFiles(split, refADir);
  const refBSegments = segmentFiles(split, refBDir);
  const [t, a, b] = await Promise.all([
    unionOfSegments(trialDir, trialSegments),
    unionOfSegments(refADir, referenceSegments),
    unionOfSegments(refBDir, refBSegments),
  ]);
  const seen = new Set<number>();
  const stepsTwice = new Set<number>();
  for (const row of t) {
    const step = Number(row.step);
    if (seen.has(step)) stepsTwice.add(step);
    seen.add(step);
  }

  const problems: string[] = [];
  const rowsOf = new Map<string, number>();
  for (const file of trialSegments) {
    const manifest = readJson(path.join(trialDir, `${file}.manifest.json`));
    const rows = (await parquetRows(path.join(trialDir, file))).length;
    rowsOf.set(file, rows);
    if (!manifest) problems.push(`${file}: no readable manifest`);
    else if (manifest.sha256 !== sha256(path.join(trialDir, file)) || manifest.rows !== rows)
      problems.push(`${file}: its manifest does not describe it (sha256 or rows)`);
  }
  const merged = readJson(path.join(trialDir, `${split.merged}.manifest.json`));
  if (merged) {
    const inputs = (Array.isArray(merged.inputs) ? merged.inputs : []) as unknown[];
    const listed = inputs.map((input) => segmentOfInput(split, input)).filter((f): f is string => f !== null);
    if (JSON.stringify([...listed].sort()) !== JSON.stringify(trialSegments))
      problems.push(
        `${split.merged}.manifest.json: its inputs name ${JSON.stringify(listed)}, not the segment files ${JSON.stringify(trialSegments)}`,
      );
    for (const input of inputs) {
      const file = segmentOfInput(split, input);
      if (file === null || !trialSegments.includes(file)) continue;
      const ref = input as Row;
      if (ref.sha256 !== sha256(path.join(trialDir, file)) || ref.rows !== rowsOf.get(file))
        problems.push(`${split.merged}.manifest.json: its input ${file} is not that file (sha256 or rows)`);
    }
  }

  const [st, sa] = [dropKeys(t, split.recordedAt), dropKeys(a, split.recordedAt)].map((rows) =>
    stable(rows, dropKeys(a, split.recordedAt), dropKeys(b, split.recordedAt)),
  ) as [Row[], Row[]];
  const rowDiffs: unknown[] = [];
  for (let i = 0; i < Math.max(st.length, sa.length) && rowDiffs.length < 5; i++) {
    if (JSON.stringify(st[i]) === JSON.stringify(sa[i])) continue;
    const fields: Record<string, unknown> = {};
    for (const k of new Set([...Object.keys(st[i] ?? {}), ...Object.keys(sa[i] ?? {})]))
      if (JSON.stringify(st[i]?.[k]) !== JSON.stringify(sa[i]?.[k])) fields[k] = { trial: st[i]?.[k], reference: sa[i]?.[k] };
    rowDiffs.push({ row: i, fields });
  }
  return {
    same: rowDiffs.length === 0 && stepsTwice.size === 0 && problems.length === 0,
    trialSegments,
    referenceSegments,
    stepsTwice: [...stepsTwice].sort((x, y) => x - y),
    problems,
    rowDiffs,
  };
}

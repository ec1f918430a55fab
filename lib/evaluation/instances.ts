import { readRows } from '../artifacts';
import type { InstanceTruth } from '../reports';
import { groundTruthFromColumns } from '../../schemas/ground-truth';

/**
 * The evaluation's instances, read from the environment stage's samples (schemas/environment.ts), in the one
 * order every evaluation activity uses: by repository, commit and instance id, so a shard's instances share
 * worktrees (a BM25 or dense index is built once per commit, not once per instance).
 */

export interface EvaluationInstance {
  instanceId: string;
  repo: string;
  baseCommit: string;
  problemStatement: string;
  /** The sample's worktree; null when the environment stage could not make it or made none (BM25/dense need none). */
  worktreePath: string | null;
  /** The repository's bare clone (BM25 and dense read the commit's files from it); null in samples older than the column. */
  gitDir: string | null;
  truth: InstanceTruth;
}

export interface EvaluationInstances {
  instances: EvaluationInstance[];
  withoutGroundTruth: number;
  notSelected: number;
  /** Ids of `selected` that are not samples with ground truth. */
  unknown: string[];
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function stringList(row: Record<string, unknown>, column: string, where: string): string[] {
  const value = row[column];
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string'))
    throw new Error(`${where}: column ${column} must be a list of strings`);
  return value as string[];
}

function text(row: Record<string, unknown>, column: string, where: string): string {
  const value = row[column];
  if (typeof value !== 'string') throw new Error(`${where}: column ${column} must be a string`);
  return value;
}

/** Reads the samples artifact; keeps samples with ground truth, and only `selected` ones when given. */
export async function loadEvaluationInstances(samplesUri: string, selected?: readonly string[]): Promise<EvaluationInstances> {
  const wanted = selected ? new Set(selected) : null;
  const found = new Set<string>();
  const instances: EvaluationInstance[] = [];
  let withoutGroundTruth = 0;
  let notSelected = 0;
  for await (const record of readRows(samplesUri)) {
    const where = `samples ${samplesUri} row ${record.ordinal}`;
    if ('error' in record) throw new Error(`${where}: ${record.error}`);
    const row = record.row as Record<string, unknown>;
    if (!('gold_files' in row)) {
      throw new Error(
        `${where}: no ground-truth columns (gold_files …); evaluate the environment stage's samples (environment/samples.parquet), not CATM's`,
      );
    }
    const instanceId = text(row, 'instanceId', where);
    if (wanted && !wanted.has(instanceId)) {
      notSelected++;
      continue;
    }
    if (row.groundTruthError !== null && row.groundTruthError !== undefined) {
      withoutGroundTruth++;
      continue;
    }
    found.add(instanceId);
    const truth = groundTruthFromColumns(row);
    instances.push({
      instanceId,
      repo: text(row, 'repo', where),
      baseCommit: text(row, 'baseCommit', where),
      problemStatement: text(row, 'problemStatement', where),
      worktreePath: typeof row.worktreePath === 'string' ? row.worktreePath : null,
      gitDir: typeof row.gitDir === 'string' ? row.gitDir : null,
      truth: {
        goldFiles: truth.files,
        targetFiles: stringList(row, 'targetFiles', where),
        lineRanges: truth.lineRanges,
        modules: truth.modules,
        functions: truth.functions,
      },
    });
  }
  instances.sort((a, b) => compare(a.repo, b.repo) || compare(a.baseCommit, b.baseCommit) || compare(a.instanceId, b.instanceId));
  const unknown = selected ? selected.filter((id) => !found.has(id)) : [];
  return { instances, withoutGroundTruth, notSelected, unknown };
}

export function shardCountFor(instances: number, shardSize: number): number {
  return Math.ceil(instances / shardSize);
}

/** Shard `index` of the ordered instances: consecutive runs of `shardSize`. */
export function shardOf<T>(instances: readonly T[], shardSize: number, index: number): T[] {
  const count = shardCountFor(instances.length, shardSize);
  if (!Number.isInteger(index) || index < 0 || index >= count)
    throw new RangeError(`shard ${index} does not exist: ${instances.length} instances make ${count} shards of ${shardSize}`);
  return instances.slice(index * shardSize, (index + 1) * shardSize);
}

/** `shard-0003-of-0040.parquet`: sorts in shard order. */
export function shardFileName(index: number, count: number): string {
  const width = Math.max(4, String(count).length);
  return `shard-${String(index).padStart(width, '0')}-of-${String(count).padStart(width, '0')}.parquet`;
}

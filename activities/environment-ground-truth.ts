import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { log } from '@temporalio/activity';
import { findCachedArtifact, hashConfig, readRows, sourceRef, writeParquetArtifact } from '../lib/artifacts';
import { groundTruthForPatch } from '../lib/patch/ground-truth';
import {
  ENVIRONMENT_SAMPLES_SCHEMA_NAME,
  ENVIRONMENT_SAMPLES_SCHEMA_VERSION,
  GroundTruthInputSchema,
  environmentSamplesArrowSchema,
  type GroundTruthInput,
  type GroundTruthOutput,
  type GroundTruthSummary,
} from '../schemas/environment';
import { groundTruthToColumns, type GroundTruth } from '../schemas/ground-truth';
import { parseInstanceRecord, type FileChange } from '../schemas/instances';
import { targetsFromFileChanges } from '../lib/patch/codescout-layout';
import { SampleSchema, type Sample } from '../schemas/samples';
import { WorktreeResultSchema } from '../schemas/worktrees';
import { ProgressReporter } from './kit';

const execFileAsync = promisify(execFile);

const emptyTruth: GroundTruth = {
  files: [],
  lineRanges: [],
  changedLineRanges: [],
  modules: [],
  functions: [],
  newFiles: [],
  deletedFiles: [],
  preImageErrors: [],
};

/**
 * The pre-image of a repo-relative path at the worktree's commit, read from git's object store (never through
 * the filesystem, so a patch path such as `../x` cannot reach outside the repository). null when absent.
 */
function preImageReader(worktree: string) {
  return async (file: string): Promise<string | null> => {
    try {
      const { stdout } = await execFileAsync('git', ['-C', worktree, 'cat-file', 'blob', `HEAD:${file}`], {
        maxBuffer: 256 * 1024 * 1024,
        encoding: 'utf8',
        env: { ...process.env, GIT_TERMINAL_PROMPT: '0' },
      });
      return stdout;
    } catch {
      return null;
    }
  };
}

/**
 * Ground truth from the gold patches (SPEC §5; CodeScout §3.1): files, pre-image line ranges, and the classes
 * and functions they touch, found with tree-sitter on the pre-image in each sample's worktree. Written as the
 * samples artifact with the ground-truth columns (schema version 2).
 */
export async function deriveGroundTruth(rawInput: GroundTruthInput): Promise<GroundTruthOutput> {
  const input = GroundTruthInputSchema.parse(rawInput);
  const outPath = path.join(input.runDir, 'environment', 'samples.parquet');
  const instances = await sourceRef(input.instancesPath);
  const inputs = [input.samples, input.worktrees, instances];
  // `samplesWithoutWorktree: dropped`: samples of commits that could not be materialized are not rows any more.
  const configHash = hashConfig({ stage: 'ground-truth', samplesWithoutWorktree: 'dropped' });
  const worktreeByCommit = new Map<string, string>();
  for await (const record of readRows(input.worktrees.uri)) {
    if ('error' in record) continue;
    const row = WorktreeResultSchema.parse(record.row);
    if (row.status !== 'failed') worktreeByCommit.set(`${row.repo}@${row.commit}`, row.path);
  }
  // A sample whose commit could not be materialized was dropped by the worktrees step (onUnavailable: skip,
  // listed in environment/dropped.parquet with its reason): the later stages see only the rest.
  const samples: Sample[] = [];
  let withoutWorktree = 0;
  for await (const record of readRows(input.samples.uri)) {
    if ('error' in record) throw new Error(`samples ${input.samples.uri} row ${record.ordinal}: ${record.error}`);
    const sample = SampleSchema.parse(record.row);
    if (worktreeByCommit.has(`${sample.repo}@${sample.baseCommit}`)) samples.push(sample);
    else withoutWorktree++;
  }
  const cached = await findCachedArtifact(outPath, { schemaName: ENVIRONMENT_SAMPLES_SCHEMA_NAME, schemaVersion: ENVIRONMENT_SAMPLES_SCHEMA_VERSION, inputs, configHash });
  if (cached) {
    log.info('ground truth: cache hit', { samples: cached.uri });
    const summary = await summarizeCached(cached.uri);
    return { samples: cached, summary: { ...summary, samples: summary.samples + withoutWorktree, withoutWorktree }, cached: true };
  }
  const summary = emptySummary();
  summary.samples = withoutWorktree;
  summary.withoutWorktree = withoutWorktree;

  const wanted = new Set(samples.map((s) => s.instanceId));
  const patches = new Map<string, string>();
  const fileChanges = new Map<string, FileChange[]>();
  for await (const record of readRows(input.instancesPath)) {
    const parsed = parseInstanceRecord(record);
    if (parsed.ok && wanted.has(parsed.instance.instance_id)) {
      patches.set(parsed.instance.instance_id, parsed.instance.patch);
      if (parsed.instance.file_changes) fileChanges.set(parsed.instance.instance_id, parsed.instance.file_changes);
    }
  }

  const progress = new ProgressReporter();
  const rows: Record<string, unknown>[] = [];
  try {
    for (const sample of samples) {
      summary.samples++;
      const worktree = worktreeByCommit.get(`${sample.repo}@${sample.baseCommit}`)!;
      let truth = emptyTruth;
      let error: string | null = null;
      const patch = patches.get(sample.instanceId);
      if (!patch) {
        summary.patchErrors++;
        error = 'instance patch not found in the instances input';
      } else {
        try {
          truth = await groundTruthForPatch(patch, preImageReader(worktree));
          // CodeScout-layout instances carry their own module / function labels: those are the targets.
          const labelled = fileChanges.get(sample.instanceId);
          if (labelled) {
            const targets = targetsFromFileChanges(labelled);
            truth = { ...truth, modules: targets.modules, functions: targets.functions };
            summary.fromFileChanges++;
          }
          summary.withGroundTruth++;
          summary.preImageErrors += truth.preImageErrors.length;
          summary.files += truth.files.length;
          summary.modules += truth.modules.length;
          summary.functions += truth.functions.length;
        } catch (e) {
          summary.patchErrors++;
          error = `gold patch: ${(e as Error).message}`;
        }
      }
      rows.push({ ...sample, ...groundTruthToColumns(truth), worktreePath: worktree, groundTruthError: error });
      progress.report({ stage: 'ground-truth', done: summary.samples - withoutWorktree, total: samples.length, unit: 'samples', counts: { derived: summary.withGroundTruth } });
    }
  } finally {
    progress.close();
  }
  const out = await writeParquetArtifact({
    path: outPath,
    schemaName: ENVIRONMENT_SAMPLES_SCHEMA_NAME,
    schemaVersion: ENVIRONMENT_SAMPLES_SCHEMA_VERSION,
    arrowSchema: environmentSamplesArrowSchema,
    rows,
    inputs,
    configHash,
  });
  await progress.flush();
  log.info('ground truth: done', { ...summary });
  return { samples: out, summary, cached: false };
}

function emptySummary(): GroundTruthSummary {
  return { samples: 0, withGroundTruth: 0, withoutWorktree: 0, patchErrors: 0, preImageErrors: 0, files: 0, modules: 0, functions: 0, fromFileChanges: 0 };
}

async function summarizeCached(uri: string): Promise<GroundTruthSummary> {
  const summary = emptySummary();
  for await (const record of readRows(uri)) {
    if ('error' in record) continue;
    const row = record.row as Record<string, unknown>;
    const length = (column: string) => (Array.isArray(row[column]) ? (row[column] as unknown[]).length : 0);
    summary.samples++;
    const error = row.groundTruthError as string | null;
    if (error === null) summary.withGroundTruth++;
    else summary.patchErrors++;
    summary.preImageErrors += length('gold_pre_image_errors');
    summary.files += length('gold_files');
    summary.modules += length('gold_modules');
    summary.functions += length('gold_functions');
  }
  return summary;
}

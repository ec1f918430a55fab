import { statSync } from 'node:fs';
import { z } from 'zod';
import { readRows } from '../artifacts';
import type { StoreSettings } from '../artifacts/store';
import type { AgentInstance } from '../../schemas/agent';
import { groundTruthFromColumns, type GoldLineRange } from '../../schemas/ground-truth';
import { SampleSchema } from '../../schemas/samples';
import type { TrainingRecipe } from '../../schemas/training/config';
import { recipeDefinition } from './recipes';

/** What the rewards compare an answer with (docs/design.md "Rewards"). Files the gold patch creates are left out. */
export interface RewardTargets {
  /** G(x) = Gpatch(x) ∪ retained CATM files (CodeGrep §3.4): the file-level target of v1/v2/v3. */
  targetFiles: string[];
  /** Gpatch(x): files the gold patch changes, to tell CATM-only targets apart (CodeGrep App. B). */
  patchFiles: string[];
  /** Gr: the patch's pre-image hunk ranges (CodeGrep App. B). */
  goldLineRanges: GoldLineRange[];
  /** CodeScout's module (`file.py:Class`) and function (`file.py:Class.method`, `file.py:func`) gold sets. */
  modules: string[];
  functions: string[];
}

export interface EnvSample {
  instance: AgentInstance;
  /** The sample's git worktree: every tool of its episodes runs inside it. */
  worktree: string;
  targets: RewardTargets;
}

export interface SkippedSample {
  instanceId: string | null;
  reason: string;
}

export interface LoadedEnvSamples {
  /** Trainable samples by instance id. */
  samples: Map<string, EnvSample>;
  /** Their instance ids in file order: the order the trainer's data fingerprint is taken over. */
  instanceIds: string[];
  skipped: SkippedSample[];
}

const EnvironmentRowSchema = SampleSchema.extend({
  // The environment stage fills baseCommit (the worktree's commit); the use_patch columns are absent from
  // environment samples written before CodeScout's SWE-Smith rows were read (schema version 2).
  baseCommit: z.string().regex(/^[0-9a-f]{40}$/),
  bugPatch: z.string().nullish(),
  bugPatchSha256: z.string().nullish(),
  worktreePath: z.string().min(1).nullable(),
  groundTruthError: z.string().nullable(),
});

function entityFile(entity: string): string {
  const colon = entity.lastIndexOf(':');
  return colon === -1 ? entity : entity.slice(0, colon);
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * One environment samples row (schemas/environment.ts: the CATM sample, its ground-truth columns and its
 * worktree) as a trainable sample, or why it cannot be one: ground truth that could not be derived, no
 * worktree (or one that is gone), or nothing left to find once the files the gold patch creates are
 * dropped (no agent can name a file that does not exist in the pre-image).
 */
export function envSampleFromRow(
  row: Record<string, unknown>,
  recipe: TrainingRecipe,
  options: LoadEnvSamplesOptions = {},
): { ok: true; sample: EnvSample } | { ok: false; skipped: SkippedSample } {
  const instanceId = typeof row.instanceId === 'string' && row.instanceId !== '' ? row.instanceId : null;
  const skip = (reason: string) => ({ ok: false as const, skipped: { instanceId, reason } });
  const parsed = EnvironmentRowSchema.safeParse(row);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return skip(`not an environment sample row: ${issue.path.join('.') || '(row)'}: ${issue.message}`);
  }
  const sample = parsed.data;
  if (sample.groundTruthError !== null) return skip(`no ground truth: ${sample.groundTruthError}`);
  if (sample.worktreePath === null) return skip('no worktree for its commit');
  // the run's artifact store (README "Deployment: several machines"): a node that shares no disk with the environment stage uses its own worktree of the commit
  const worktree = options.worktreePath ? options.worktreePath(row) : sample.worktreePath;
  if (worktree === null) return skip(`no worktree on this node for ${sample.repo}@${sample.baseCommit}`);
  if (!isDirectory(worktree)) return skip(`worktree ${worktree} is not a directory`);
  if (sample.problemStatement.trim() === '') return skip('empty problem statement');
  let truth;
  try {
    truth = groundTruthFromColumns(row);
  } catch (error) {
    return skip((error as Error).message);
  }
  const created = new Set(truth.newFiles);
  const existing = (file: string) => !created.has(file);
  const targets: RewardTargets = {
    targetFiles: sample.targetFiles.filter(existing),
    patchFiles: truth.files.filter(existing),
    goldLineRanges: truth.lineRanges.filter((r) => existing(r.path)),
    modules: truth.modules.filter((m) => existing(entityFile(m))),
    functions: truth.functions.filter((f) => existing(entityFile(f))),
  };
  const answerFormat = recipeDefinition(recipe).answerFormat;
  const findable = answerFormat === 'codegrep' ? targets.targetFiles : targets.patchFiles;
  if (findable.length === 0) {
    return skip(created.size > 0 ? 'every gold file is created by the patch: nothing to find' : 'no target files');
  }
  return {
    ok: true,
    sample: {
      instance: { instanceId: sample.instanceId, repo: sample.repo, problemStatement: sample.problemStatement },
      worktree,
      targets,
    },
  };
}

export interface LoadEnvSamplesOptions {
  /**
   * Maps a row to the worktree to use on this node (README "Deployment: several machines": a GPU node materializes its own worktrees;
   * the row's `worktreePath` names the environment stage's node). Default: the row's `worktreePath`.
   */
  worktreePath?: (row: Record<string, unknown>) => string | null;
  /** How to reach a store URI's object (a worker's settings, read at its start); default: this process's environment. */
  storeSettings?: StoreSettings;
}

/** Reads the environment stage's samples artifact (`environment/samples.parquet`) into trainable samples. */
export async function loadEnvSamples(path: string, recipe: TrainingRecipe, options: LoadEnvSamplesOptions = {}): Promise<LoadedEnvSamples> {
  const loaded: LoadedEnvSamples = { samples: new Map(), instanceIds: [], skipped: [] };
  for await (const record of readRows(path, options.storeSettings)) {
    if ('error' in record) {
      loaded.skipped.push({ instanceId: null, reason: `row ${record.ordinal}: ${record.error}` });
      continue;
    }
    const result = envSampleFromRow(record.row as Record<string, unknown>, recipe, options);
    if (!result.ok) {
      loaded.skipped.push(result.skipped);
      continue;
    }
    const id = result.sample.instance.instanceId;
    if (loaded.samples.has(id)) {
      loaded.skipped.push({ instanceId: id, reason: 'duplicate instance id (the first row is used)' });
      continue;
    }
    loaded.samples.set(id, result.sample);
    loaded.instanceIds.push(id);
  }
  return loaded;
}

import { episodeToolDefinitions, runAgentRetriever } from '../agent';
import { openAppendLog, readAppendLog } from '../artifacts';
import { loadEnvSamples, type EnvSample } from '../envserver';
import { recipeDefinition } from '../envserver/recipes';
import { scoreEpisode } from '../envserver/score-episode';
import { mapWithConcurrency } from '../evaluation/predict-shard';
import { LlmRequestRejectedError } from '../llm/errors';
import type { LlmEndpoint } from '../llm/endpoint';
import { stageLayout } from '../paths/stage-layout';
import { environmentLimits } from '../training/trainer-config';
import { holdWorktrees } from '../worktrees/holds';
import type { AgentLimits } from '../../schemas/agent';
import type { RftConfig, RftTrajectoryRow } from '../../schemas/rft';
import type { ResolvedTrainingConfig } from '../../schemas/training/config';
import { answerLevelF1, isKept, keepThresholds } from './keep';

/**
 * RFT's sampling (CodeScout §4.1): the teacher runs the very episode the student will run in training (lib/agent's
 * loop over the environment's worktrees, the training recipe's answer format, tools and turn limit) and each
 * rollout is scored with the training recipe's reward (lib/envserver scoreEpisode) and per-level F1.
 */

export interface RftSamplingOptions {
  endpoint: LlmEndpoint;
  /** What the rows' `teacher` column says. */
  teacher: string;
  rft: RftConfig;
  training: ResolvedTrainingConfig;
  signal: AbortSignal;
}

/** The episode limits of the student's training (the rft section may set its own). */
export function rftLimits(rft: RftConfig, training: ResolvedTrainingConfig): AgentLimits {
  const student = environmentLimits(training);
  return { ...student, ...(rft.limits ?? {}) };
}

/** One rollout of the teacher on one sample, scored; a request the endpoint rejects is a failed row, never kept. */
export async function sampleRollout(sample: EnvSample, options: RftSamplingOptions): Promise<RftTrajectoryRow> {
  const { rft, training } = options;
  const answerFormat = recipeDefinition(training.recipe).answerFormat;
  const limits = rftLimits(rft, training);
  const tools = JSON.stringify(episodeToolDefinitions(answerFormat));
  const base = { instanceId: sample.instance.instanceId, teacher: options.teacher, tools, inputIds: null, policyMask: null };
  let result;
  try {
    result = await runAgentRetriever({
      endpoint: options.endpoint,
      instance: sample.instance,
      worktreeRoot: sample.worktree,
      answerFormat,
      limits,
      ...(rft.temperature === undefined ? {} : { temperature: rft.temperature }),
      ...(rft.topP === undefined ? {} : { topP: rft.topP }),
      retry: { timeoutMs: rft.timeoutMs },
      sandbox: { isolation: training.sandbox.isolation },
      signal: options.signal,
    });
  } catch (error) {
    if (!(error instanceof LlmRequestRejectedError) || options.signal.aborted) throw error;
    return failedRow(base, error.message);
  }
  const score = scoreEpisode(result, sample.targets, {
    recipe: training.recipe,
    maxTurns: limits.maxTurns ?? result.turns,
    codescoutTurnBonus: training.codescoutTurnBonus,
  });
  const f1 = answerLevelF1(result.answerValid ? result.answer : null, answerFormat, {
    files: sample.targets.patchFiles,
    modules: sample.targets.modules,
    functions: sample.targets.functions,
  });
  return {
    ...base,
    reward: score.reward,
    fileF1: f1.file,
    moduleF1: f1.module,
    functionF1: f1.function,
    kept: isKept(f1, keepThresholds(rft.keep), false),
    endReason: result.endReason,
    turns: result.turns,
    toolCalls: result.toolCalls,
    error: null,
    messages: JSON.stringify(result.trajectory),
  };
}

function failedRow(
  base: Pick<RftTrajectoryRow, 'instanceId' | 'teacher' | 'tools' | 'inputIds' | 'policyMask'>,
  error: string,
): RftTrajectoryRow {
  return {
    ...base,
    reward: 0,
    fileF1: 0,
    moduleF1: null,
    functionF1: null,
    kept: false,
    endReason: null,
    turns: 0,
    toolCalls: 0,
    error,
    messages: '[]',
  };
}

/** The shard's instance ids: consecutive runs of `shardSize` in sorted id order (the one order every activity uses). */
export function rftShardInstances(instanceIds: readonly string[], shardSize: number, shardIndex: number): string[] {
  return [...instanceIds].sort().slice(shardIndex * shardSize, (shardIndex + 1) * shardSize);
}

export function rftShardCount(instances: number, shardSize: number): number {
  return Math.ceil(instances / shardSize);
}

/**
 * One shard of the sampling, resumable: every finished rollout is appended (fsynced) to the shard's log as it
 * completes, and a rerun reads the log first and asks the teacher only for the instances not in it, so a kill
 * mid-shard neither re-asks a finished instance nor records one twice (the log is deduplicated by instance id,
 * the first record winning). Returns the shard's rows in instance order.
 */
export async function sampleRftShard(input: {
  logDir: string;
  shardName: string;
  samplesUri: string;
  instanceIds: readonly string[];
  options: RftSamplingOptions;
  onRollout?: (done: number) => void;
}): Promise<{ rows: RftTrajectoryRow[]; resumed: number }> {
  const { options } = input;
  const finished = new Map<string, RftTrajectoryRow>();
  for (const record of (await readAppendLog<RftTrajectoryRow>(input.logDir)).records) {
    if (input.instanceIds.includes(record.instanceId) && !finished.has(record.instanceId)) finished.set(record.instanceId, record);
  }
  const resumed = finished.size;
  const loaded = await loadEnvSamples(input.samplesUri, options.training.recipe);
  const skipped = new Map(loaded.skipped.map((s) => [s.instanceId, s.reason]));
  const todo = input.instanceIds.filter((id) => !finished.has(id));
  // The teacher's episodes run in the environment's shared worktrees: held while the shard runs, so a disk budget
  // (`environment.maxWorktreeBytes`, lib/worktrees/budget.ts) never prunes one under an episode.
  const hold = await holdWorktrees(todo.flatMap((id) => loaded.samples.get(id)?.worktree ?? []));
  const log = await openAppendLog(input.logDir, input.shardName).catch(async (error: unknown) => {
    await hold.release();
    throw error;
  });
  let done = resumed;
  try {
    await mapWithConcurrency(todo, options.rft.concurrency, async (instanceId) => {
      const sample = loaded.samples.get(instanceId);
      const tools = JSON.stringify(episodeToolDefinitions(recipeDefinition(options.training.recipe).answerFormat));
      const row = sample
        ? await sampleRollout(sample, options)
        : failedRow(
            { instanceId, teacher: options.teacher, tools, inputIds: null, policyMask: null },
            `not a trainable sample: ${skipped.get(instanceId) ?? 'not in the samples'}`,
          );
      await log.append([row]);
      finished.set(instanceId, row);
      input.onRollout?.(++done);
    });
  } finally {
    try {
      await log.close();
    } finally {
      await hold.release();
    }
  }
  return { rows: input.instanceIds.map((id) => finished.get(id)!), resumed };
}

export function rftLayout(runDir: string) {
  return stageLayout(runDir, 'rft', {
    trainingSamples: 'training-samples.parquet',
    rftSamples: 'rft-samples.parquet',
    shards: 'shards',
    sampled: 'sampled.parquet',
    trajectories: 'trajectories.parquet',
    sft: 'sft',
  });
}

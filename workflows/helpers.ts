import { ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ResolvedConfig } from '../lib/config';
import { RUN_ARTIFACTS } from '../lib/paths/run-artifacts';
import type { ArtifactRef } from '../schemas/artifact-ref';
import type { PipelineConfigInput } from '../schemas/config';
import { activityOptions, type TimeoutOverrides } from './activity-options';
import type { StageTracker } from './stage-tracker';

/** Helpers the stage workflows share. Workflow code: deterministic, no I/O (that is what activities are for). */

/**
 * Every stage workflow's first step: the validateConfig activity (so `temporal workflow start` gets the same
 * checks as `codegrep run`), and the activity timeout overrides of the config's `temporal` section.
 */
export async function validatedConfig(input: PipelineConfigInput): Promise<{ config: ResolvedConfig; overrides: TimeoutOverrides }> {
  const { validateConfig } = proxyActivities<Activities>(activityOptions('short'));
  const config = await validateConfig(input);
  return { config, overrides: config.temporal.activityTimeouts as TimeoutOverrides };
}

/** A config without the section a workflow needs: a ConfigError, as validateConfig's, that no retry can fix. */
export function missingSection(message: string): ApplicationFailure {
  return ApplicationFailure.create({ type: 'ConfigError', nonRetryable: true, message });
}

/** Where each stage that hands samples on leaves them in the run directory. */
const SAMPLES_OF = {
  catm: RUN_ARTIFACTS.catmSamples,
  environment: RUN_ARTIFACTS.environmentSamples,
} as const;

/**
 * A stage's input samples: those its parent passed (a pipeline, a training run's validation), else the ones the
 * stage `producedBy` left in the run directory (a stage started on its own, after an earlier run).
 */
export async function stageSamples(
  input: { artifacts?: { samples?: ArtifactRef } },
  runDir: string,
  producedBy: keyof typeof SAMPLES_OF,
): Promise<ArtifactRef> {
  const { findRunArtifact } = proxyActivities<Activities>(activityOptions('short'));
  return input.artifacts?.samples ?? (await findRunArtifact({ runDir, relativePath: SAMPLES_OF[producedBy], producedBy }));
}

/**
 * Counts a stage's settled shards into its progress, shown at once as none of `total` (a running shard heartbeats
 * its own instance count). `counted(run)` is a shard's task for `settleAll`: `run` starts the shard's activity.
 */
export function shardCounter(tracker: StageTracker, stage: string, total: number) {
  let settledShards = 0;
  const showProgress = () => tracker.progress({ stage, done: settledShards, total, unit: 'shards', counts: {} });
  showProgress();
  return <T>(run: () => Promise<T>) =>
    async (): Promise<T> => {
      try {
        return await run();
      } finally {
        settledShards += 1;
        showProgress();
      }
    };
}

/** Runs one step of a stage's table: started, then finished as cached or completed with the note `note` makes. */
export async function trackedStep<T>(
  tracker: StageTracker,
  step: string,
  run: () => Promise<T>,
  note?: (result: T) => string | undefined,
): Promise<T> {
  tracker.start(step);
  const result = await run();
  const cached = (result as { cached?: unknown }).cached === true;
  tracker.finish(step, cached ? 'cached' : 'completed', note?.(result));
  return result;
}

/** Runs the tasks with at most `limit` in flight; every task settles, failures included. */
export async function settleAll<T>(tasks: (() => Promise<T>)[], limit: number): Promise<PromiseSettledResult<T>[]> {
  const results = new Array<PromiseSettledResult<T>>(tasks.length);
  let next = 0;
  const lane = async () => {
    while (next < tasks.length) {
      const i = next++;
      try {
        results[i] = { status: 'fulfilled', value: await tasks[i]!() };
      } catch (reason) {
        results[i] = { status: 'rejected', reason };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, tasks.length)) }, lane));
  return results;
}

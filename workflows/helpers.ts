import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ResolvedConfig } from '../lib/config';
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

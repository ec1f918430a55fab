import { proxyActivities } from '@temporalio/workflow';
import type * as activities from '../activities';
import type { ArtifactRef } from '../schemas/artifact-ref';
import type { PipelineConfigInput } from '../schemas/config';
import type { EnvironmentResult } from '../schemas/environment';
import { activityOptions, type TimeoutOverrides } from './activity-options';
import { StageTracker } from './stage-tracker';

export const environmentStages = ['worktrees', 'ground-truth'] as const;

export type EnvironmentInput = PipelineConfigInput & { artifacts?: { samples?: ArtifactRef } };

/**
 * The RL environment (CodeGrep §3.3, CodeScout §3.1): samples ──materialize──▶ worktrees (bare clone + git
 * worktree per commit) ──▶ samples with ground truth at file, line-range, class and function level.
 *
 * History bound (issue #12): at most three activities and no signals (progress is in their heartbeats): under
 * 50 events, however many repositories it materializes.
 */
export async function environment(input: EnvironmentInput): Promise<EnvironmentResult> {
  const { validateConfig, findRunArtifact } = proxyActivities<typeof activities>(activityOptions('short'));
  const config = await validateConfig(input);
  const overrides = config.temporal.activityTimeouts as TimeoutOverrides;
  const { materializeWorktrees, deriveGroundTruth } = proxyActivities<typeof activities>(activityOptions('worktrees', overrides));

  const tracker = new StageTracker(config.runId, config.recipe, environmentStages);
  const common = { runId: config.runId, runDir: config.runDir };
  const samples =
    input.artifacts?.samples ?? (await findRunArtifact({ runDir: config.runDir, relativePath: 'catm/samples.parquet', producedBy: 'catm' }));

  tracker.start('worktrees');
  let materialized;
  try {
    materialized = await materializeWorktrees({ ...common, samples, environment: config.environment });
  } catch (error) {
    tracker.finish('worktrees', 'failed', 'see the failure for the repositories and the mirror config key');
    throw error;
  }
  const m = materialized.summary;
  const droppedNote = m.droppedSamples > 0 ? `; ${m.droppedSamples} samples dropped (${m.failed} commits unavailable, see environment/dropped.parquet)` : '';
  tracker.finish('worktrees', 'completed', `${m.commits} commits, ${m.created} created, ${m.reused} reused${droppedNote}`);

  tracker.start('ground-truth');
  const truth = await deriveGroundTruth({ ...common, samples, worktrees: materialized.worktrees, instancesPath: config.inputs.instances });
  tracker.finish('ground-truth', truth.cached ? 'cached' : 'completed', `${truth.summary.withGroundTruth} of ${truth.summary.samples} samples`);

  tracker.complete();
  return { worktrees: materialized.worktrees, dropped: materialized.dropped, samples: truth.samples, materialize: materialized.summary, groundTruth: truth.summary };
}

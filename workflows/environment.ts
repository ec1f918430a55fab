import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ArtifactRef } from '../schemas/artifact-ref';
import type { PipelineConfigInput } from '../schemas/config';
import { checkoutsNeeded, type EnvironmentResult, type MaterializeSummary } from '../schemas/environment';
import { activityOptions } from './activity-options';
import { stageSamples, trackedStep, validatedConfig } from './helpers';
import { StageTracker } from './stage-tracker';

export const environmentStages = ['worktrees', 'ground-truth'] as const;

export type EnvironmentInput = PipelineConfigInput & { artifacts?: { samples?: ArtifactRef } };

const materializeNote = (m: MaterializeSummary) =>
  `${m.commits} commits, ${m.created} created, ${m.reused} reused` +
  (m.droppedSamples > 0 ? `; ${m.droppedSamples} samples dropped (${m.failed} commits unavailable, see environment/dropped.parquet)` : '');

/**
 * The RL environment (CodeGrep §3.3, CodeScout §3.1): samples ──materialize──▶ worktrees (bare clone + git
 * worktree per commit) ──▶ samples with ground truth at file, line-range, class and function level.
 *
 * History bound (README "History bounds"): at most three activities and no signals (progress is in their heartbeats): under
 * 50 events, however many repositories it materializes.
 */
export async function environment(input: EnvironmentInput): Promise<EnvironmentResult> {
  const { config, overrides } = await validatedConfig(input);
  const { materializeWorktrees, deriveGroundTruth } = proxyActivities<Activities>(activityOptions('worktrees', overrides));

  const tracker = new StageTracker(config.runId, config.recipe, environmentStages);
  const common = { runId: config.runId, runDir: config.runDir };
  const samples = await stageSamples(input, config.runDir, 'catm');

  // BM25/dense-only runs read the bare repositories: no worktree per commit (environment.worktrees: auto).
  const checkout = checkoutsNeeded(config);
  const materialized = await trackedStep(
    tracker,
    'worktrees',
    () =>
      materializeWorktrees({ ...common, samples, environment: config.environment, checkout }).catch((error: unknown) => {
        tracker.finish('worktrees', 'failed', 'see the failure for the repositories and the mirror config key');
        throw error;
      }),
    (m) => materializeNote(m.summary),
  );
  const truth = await trackedStep(
    tracker,
    'ground-truth',
    () => deriveGroundTruth({ ...common, samples, worktrees: materialized.worktrees, checkout }),
    (t) => `${t.summary.withGroundTruth} of ${t.summary.samples} samples`,
  );
  tracker.complete();
  return {
    worktrees: materialized.worktrees,
    dropped: materialized.dropped,
    samples: truth.samples,
    materialize: materialized.summary,
    groundTruth: truth.summary,
  };
}

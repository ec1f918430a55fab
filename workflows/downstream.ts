import { continueAsNew, proxyActivities } from '@temporalio/workflow';
import type * as activities from '../activities';
import type { ArtifactRef } from '../schemas/artifact-ref';
import type { PipelineConfigInput } from '../schemas/config';
import type { DownstreamResult } from '../schemas/downstream/activity-io';
import { activityOptions, type TimeoutOverrides } from './activity-options';
import {
  downstreamActivities,
  planNote,
  requireDownstreamSection,
  resolveRates,
  runInLanes,
  runsFailed,
  runsProgress,
} from './downstream-helpers';
import { StageTracker } from './stage-tracker';

export const downstreamStages = ['plan', 'runs', 'summary'] as const;

export type DownstreamInput = PipelineConfigInput & {
  /** Predictions artifacts of the evaluation stage by configuration name (override the configurations' paths). */
  artifacts?: { predictions?: Record<string, ArtifactRef> };
};

/**
 * Downstream injection (CodeGrep §4.3, §5.3, App. E; CodeScout §6.1): every (configuration, instance) pair
 * ──inject──▶ frozen coding agent in a fresh checkout ──▶ harness ──▶ run record; then the records ──▶
 * runs.parquet + Table 3 (pooled and paired vs the baseline) + report. One activity per pair, at most
 * `downstream.concurrency` at a time; finished pairs are never run again (their records are reused by a
 * retried activity, a rerun of the stage, and the run that continues this one as new).
 *
 * History bound (README "History bounds"): no signals reach this workflow; each pair adds about 6 events, and the lanes stop
 * taking pairs once Temporal suggests continue-as-new (4,096 events by default), so a run's history stays
 * below 4,096 + 6 × concurrency + a few dozen events however many pairs the study has.
 */
export async function downstream(input: DownstreamInput): Promise<DownstreamResult> {
  const { validateConfig } = proxyActivities<typeof activities>(activityOptions('short'));
  const config = await validateConfig(input);
  const settings = requireDownstreamSection(config);
  const { planDownstream, runDownstreamPair, summarizeDownstream } = downstreamActivities(
    config.temporal.activityTimeouts as TimeoutOverrides,
    settings,
  );
  const tracker = new StageTracker(config.runId, config.recipe, downstreamStages);
  const common = { runId: config.runId, runDir: config.runDir };

  tracker.start('plan');
  const planned = await planDownstream({
    ...common,
    downstream: settings,
    instancesFile: settings.instancesFile ?? config.inputs.instances,
    predictions: input.artifacts?.predictions ?? {},
  });
  tracker.finish('plan', 'completed', planNote(planned));

  tracker.start('runs');
  const checkouts = { repoSource: config.environment.repoSource, cacheDir: config.environment.cacheDir };
  const { agent, harness, runTimeoutMs } = settings;
  const runs = await runInLanes(
    planned.pending,
    settings.concurrency,
    (configuration, instanceId) =>
      runDownstreamPair({ ...common, plan: planned.plan, configuration, instanceId, agent, harness, checkouts, runTimeoutMs }),
    (counts) => tracker.progress(runsProgress(planned.finished, planned.total, counts)),
  );
  if (runs.failures.length > 0) {
    tracker.finish('runs', 'failed', `${runs.failures.length} run(s) failed`);
    throw runsFailed(runs.failures, planned.total);
  }
  if (runs.left > 0) await continueAsNew<typeof downstream>(input);
  tracker.finish('runs', 'completed', `${runs.ran} run now (${runs.resolved} resolved), ${planned.finished} reused`);

  tracker.start('summary');
  const summary = await summarizeDownstream({ ...common, plan: planned.plan, bootstrap: settings.bootstrap });
  tracker.finish('summary', 'completed', resolveRates(summary));
  tracker.complete();
  return { ...summary, plan: planned.plan, pairs: planned.total, ran: runs.ran, reusedBeforeStart: planned.finished };
}

import { ActivityCancellationType, ApplicationFailure, continueAsNew, isCancellation, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type * as activities from '../activities';
import type { ArtifactRef } from '../schemas/artifact-ref';
import type { PipelineConfigInput } from '../schemas/config';
import type { DownstreamResult, RunDownstreamPairOutput } from '../schemas/downstream';
import { activityOptions, type TimeoutOverrides } from './activity-options';
import { StageTracker } from './stage-tracker';

export const downstreamStages = ['plan', 'runs', 'summary'] as const;

/** Time a run gets beyond `downstream.runTimeoutMs` to kill its processes, remove its checkouts and write its record. */
const RUN_CLEANUP_GRACE_MS = 2 * 60_000;

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
 * History bound (issue #12): no signals reach this workflow; each pair adds about 6 events, and the lanes stop
 * taking pairs once Temporal suggests continue-as-new (4,096 events by default), so a run's history stays
 * below 4,096 + 6 × concurrency + a few dozen events however many pairs the study has.
 */
export async function downstream(input: DownstreamInput): Promise<DownstreamResult> {
  const { validateConfig } = proxyActivities<typeof activities>(activityOptions('short'));
  const config = await validateConfig(input);
  const settings = config.downstream;
  if (!settings) {
    throw ApplicationFailure.create({
      type: 'ConfigError',
      nonRetryable: true,
      message: 'invalid config workflow input:\n  downstream: required to run the downstream stage ({ configurations, baseline, agent, harness })',
    });
  }
  const overrides = config.temporal.activityTimeouts as TimeoutOverrides;
  const stageOptions = activityOptions('downstream', overrides);
  const { planDownstream, summarizeDownstream } = proxyActivities<typeof activities>(stageOptions);
  const { runDownstreamPair } = proxyActivities<typeof activities>({
    ...stageOptions,
    startToCloseTimeout: settings.runTimeoutMs + RUN_CLEANUP_GRACE_MS,
    // A cancelled stage ends only once its runs have killed their agent and test processes and removed their checkouts.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  });

  const tracker = new StageTracker(config.runId, config.recipe, downstreamStages);
  const common = { runId: config.runId, runDir: config.runDir };

  tracker.start('plan');
  const planned = await planDownstream({
    ...common,
    downstream: settings,
    instancesFile: settings.instancesFile ?? config.inputs.instances,
    predictions: input.artifacts?.predictions ?? {},
  });
  tracker.finish('plan', 'completed', `${planned.total} runs (${planned.instances} instances), ${planned.finished} finished before${planned.warnings.length > 0 ? `; ${planned.warnings.join('; ')}` : ''}`);

  tracker.start('runs');
  const { configurations, instanceIds, pairs } = planned.pending;
  const queue = [...pairs];
  const failures: string[] = [];
  let ran = 0;
  let resolved = 0;
  // Progress is counted here, as pairs finish (no signals: see the history bound above).
  const showProgress = () => tracker.progress({ stage: 'runs', done: planned.finished + ran + failures.length, total: planned.total, unit: 'runs', counts: { resolved } });
  showProgress();
  const lane = async () => {
    // Stop taking new pairs when the history grows long; the continued run plans again and gets only the rest.
    while (queue.length > 0 && !workflowInfo().continueAsNewSuggested) {
      const [c, i] = queue.shift()!;
      const configuration = configurations[c]!;
      const instanceId = instanceIds[i]!;
      let result: RunDownstreamPairOutput;
      try {
        result = await runDownstreamPair({
          ...common,
          plan: planned.plan,
          configuration,
          instanceId,
          agent: settings.agent,
          harness: settings.harness,
          checkouts: { repoSource: config.environment.repoSource, cacheDir: config.environment.cacheDir },
          runTimeoutMs: settings.runTimeoutMs,
        });
      } catch (error) {
        if (isCancellation(error)) throw error;
        // One pair that cannot be run must not stop the others; the stage fails at the end, naming it.
        failures.push(`(${configuration}, ${instanceId}): ${error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error)}`);
        showProgress();
        continue;
      }
      ran += 1;
      if (result.row.resolved) resolved += 1;
      showProgress();
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(settings.concurrency, queue.length)) }, lane));

  if (failures.length > 0) {
    tracker.finish('runs', 'failed', `${failures.length} run(s) failed`);
    throw ApplicationFailure.create({
      type: 'DownstreamRunsFailed',
      nonRetryable: true,
      message: `${failures.length} of ${planned.total} downstream runs could not be run (the others are kept; starting the stage again runs only the missing ones): ${failures.slice(0, 5).join('; ')}${failures.length > 5 ? '; …' : ''}`,
    });
  }
  if (queue.length > 0) await continueAsNew<typeof downstream>(input);
  tracker.finish('runs', 'completed', `${ran} run now (${resolved} resolved), ${planned.finished} reused`);

  tracker.start('summary');
  const summary = await summarizeDownstream({ ...common, plan: planned.plan, bootstrap: settings.bootstrap });
  tracker.finish(
    'summary',
    'completed',
    summary.tableValues.rows.map((row) => `${row.configuration} ${row.resolveRate === null ? '–' : `${(row.resolveRate * 100).toFixed(1)}%`}`).join(', '),
  );
  tracker.complete();
  return { ...summary, plan: planned.plan, pairs: planned.total, ran, reusedBeforeStart: planned.finished };
}

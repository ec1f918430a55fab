import { ActivityCancellationType, ApplicationFailure, isCancellation, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { rootMessage } from '../lib/errors/root-message';
import { percent1 } from '../lib/reports/format';
import type {
  DownstreamSummaryOutput,
  PendingRuns,
  PlanDownstreamOutput,
  RunDownstreamPairOutput,
} from '../schemas/downstream/activity-io';
import type { DownstreamConfig } from '../schemas/downstream/config';
import type { StageProgress } from '../schemas/progress';
import { activityOptions, type TimeoutOverrides } from './activity-options';
import { missingSection } from './helpers';

// The downstream workflow's parts that are not the pipeline itself: activity options, the lanes, the notes.

/** Time a run gets beyond `downstream.runTimeoutMs` to kill its processes, remove its checkouts and write its record. */
const RUN_CLEANUP_GRACE_MS = 2 * 60_000;

/** The config's `downstream` section; without one the workflow cannot run (a ConfigError, as validateConfig's). */
export function requireDownstreamSection(config: { downstream?: DownstreamConfig }): DownstreamConfig {
  if (config.downstream) return config.downstream;
  throw missingSection(
    'invalid config workflow input:\n  downstream: required to run the downstream stage ({ configurations, baseline, agent, harness })',
  );
}

/** The stage's activities: plan and summary with the stage's timeouts, each pair with the run's own limit. */
export function downstreamActivities(overrides: TimeoutOverrides, settings: DownstreamConfig) {
  const stageOptions = activityOptions('downstream', overrides);
  const { planDownstream, summarizeDownstream } = proxyActivities<Activities>(stageOptions);
  const { runDownstreamPair } = proxyActivities<Activities>({
    ...stageOptions,
    startToCloseTimeout: settings.runTimeoutMs + RUN_CLEANUP_GRACE_MS,
    // A cancelled stage ends only once its runs have killed their agent and test processes and removed their checkouts.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  });
  return { planDownstream, runDownstreamPair, summarizeDownstream };
}

export interface LaneResults {
  ran: number;
  resolved: number;
  /** `(configuration, instanceId): why` of each pair that could not be run. */
  failures: string[];
  /** Pairs left for the run that continues this one as new. */
  left: number;
}

/**
 * Runs the pending pairs, `concurrency` at a time, in plan order. One pair that cannot be run does not stop the
 * others (it is listed in `failures`). Lanes stop taking pairs once Temporal suggests continue-as-new: the
 * continued run plans again and gets only the rest. `onProgress` sees the counts after each pair (no signals).
 */
export async function runInLanes(
  pending: PendingRuns,
  concurrency: number,
  runPair: (configuration: string, instanceId: string) => Promise<RunDownstreamPairOutput>,
  onProgress: (counts: { ran: number; resolved: number; failed: number }) => void,
): Promise<LaneResults> {
  const queue = [...pending.pairs];
  const results: LaneResults = { ran: 0, resolved: 0, failures: [], left: 0 };
  const report = () => onProgress({ ran: results.ran, resolved: results.resolved, failed: results.failures.length });
  report();
  const lane = async () => {
    while (queue.length > 0 && !workflowInfo().continueAsNewSuggested) {
      const [c, i] = queue.shift()!;
      const configuration = pending.configurations[c]!;
      const instanceId = pending.instanceIds[i]!;
      try {
        const result = await runPair(configuration, instanceId);
        results.ran += 1;
        if (result.row.resolved) results.resolved += 1;
      } catch (error) {
        if (isCancellation(error)) throw error;
        results.failures.push(`(${configuration}, ${instanceId}): ${rootMessage(error)}`);
      }
      report();
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, queue.length)) }, lane));
  results.left = queue.length;
  return results;
}

/** The `runs` stage's progress from the lanes' counts. */
export function runsProgress(
  finishedBefore: number,
  total: number,
  counts: { ran: number; resolved: number; failed: number },
): StageProgress {
  return { stage: 'runs', done: finishedBefore + counts.ran + counts.failed, total, unit: 'runs', counts: { resolved: counts.resolved } };
}

/** The stage's failure when pairs could not be run; the finished ones are kept. */
export function runsFailed(failures: readonly string[], total: number): ApplicationFailure {
  return ApplicationFailure.create({
    type: 'DownstreamRunsFailed',
    nonRetryable: true,
    message:
      `${failures.length} of ${total} downstream runs could not be run (the others are kept; starting the stage again runs only the missing ones): ` +
      `${failures.slice(0, 5).join('; ')}${failures.length > 5 ? '; …' : ''}`,
  });
}

/** The plan stage's note: how many runs, how many finished before, and the plan's warnings. */
export function planNote(planned: Pick<PlanDownstreamOutput, 'total' | 'instances' | 'finished' | 'warnings'>): string {
  const warnings = planned.warnings.length > 0 ? `; ${planned.warnings.join('; ')}` : '';
  return `${planned.total} runs (${planned.instances} instances), ${planned.finished} finished before${warnings}`;
}

/** Each configuration's resolve rate, for the summary stage's note. */
export function resolveRates(summary: Pick<DownstreamSummaryOutput, 'tableValues'>): string {
  return summary.tableValues.rows.map((row) => `${row.configuration} ${percent1(row.resolveRate)}`).join(', ');
}

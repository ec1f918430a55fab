import { ActivityCancellationType, continueAsNew, patched, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ResolvedConfig } from '../lib/config';
import type { ArtifactRef } from '../schemas/artifact-ref';
import type { PipelineConfigInput } from '../schemas/config';
import type { DownstreamResult } from '../schemas/downstream/activity-io';
import type { DownstreamConfig, DownstreamConfiguration } from '../schemas/downstream/config';
import type { TrainedPolicy } from '../schemas/policy-server';
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
import { PolicyServers, policyServeRequest, servedRetriever } from './policy-server';
import { StageTracker } from './stage-tracker';

export const downstreamStages = ['plan', 'runs', 'summary'] as const;

export type DownstreamInput = PipelineConfigInput & {
  /**
   * Predictions artifacts by configuration name: the evaluation stage's (override the configurations' paths),
   * and the files an `agent` configuration's policy found (carried over when the workflow continues as new).
   */
  artifacts?: { predictions?: Record<string, ArtifactRef> };
};

type AgentSource = DownstreamConfiguration & { source: 'agent'; policy: TrainedPolicy };

/**
 * The files of every `agent` configuration not found yet (README "Serving and evaluating the trained policy"):
 * its policy is served on the GPU queue (one checkpoint at a time; stopped, and reaped, when its files are
 * written) and asked about every instance with its own training config's answer format and turn limit.
 */
async function retrieveAgentSources(
  config: ResolvedConfig,
  settings: DownstreamConfig,
  overrides: TimeoutOverrides,
  found: Record<string, ArtifactRef>,
): Promise<Record<string, ArtifactRef>> {
  const missing = settings.configurations.filter((c): c is AgentSource => c.source === 'agent' && c.policy !== undefined && !found[c.name]);
  // Runs recorded before the `agent` source never had one.
  if (missing.length === 0 || !patched('downstream-agent-source')) return found;
  const { retrieveDownstreamCandidates } = proxyActivities<Activities>({
    ...activityOptions('evaluation', overrides),
    // The server stops only once the episodes asking it were stopped.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  });
  const servers = new PolicyServers(overrides);
  const serving = settings.policyServer ?? config.evaluation.policyServer;
  const retrieved = { ...found };
  for (const configuration of missing) {
    const { name, policy, checkpoint, concurrency, timeoutMs } = configuration;
    const own = {
      name:
        name
          .replace(/[^A-Za-z0-9._-]/g, '_')
          .replace(/^[._-]+/, '')
          .slice(0, 64) || 'policy',
      kind: 'agent' as const,
      policy,
      ...(checkpoint === undefined ? {} : { checkpoint }),
      ...(concurrency === undefined ? {} : { concurrency }),
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
    };
    const output = await servers.serve(policyServeRequest(config, { name, policy, checkpoint }, serving), (ready) =>
      retrieveDownstreamCandidates({
        runId: config.runId,
        runDir: config.runDir,
        configuration: name,
        retriever: servedRetriever(own, ready),
        instancesFile: settings.instancesFile ?? config.inputs.instances,
        ...(settings.instances ? { instances: settings.instances } : {}),
        checkouts: { repoSource: config.environment.repoSource, cacheDir: config.environment.cacheDir },
        isolation: config.sandbox.isolation,
      }),
    );
    retrieved[name] = output.predictions;
  }
  return retrieved;
}

/**
 * Downstream injection (CodeGrep §4.3, §5.3, App. E; CodeScout §6.1): every (configuration, instance) pair
 * ──inject──▶ frozen coding agent in a fresh checkout ──▶ harness ──▶ run record; then the records ──▶
 * runs.parquet + Table 3 (pooled and paired vs the baseline) + report. One activity per pair, at most
 * `downstream.concurrency` at a time; finished pairs are never run again (their records are reused by a
 * retried activity, a rerun of the stage, and the run that continues this one as new).
 *
 * An `agent` configuration's files are found first, by its policy served for the stage (retrieveAgentSources).
 *
 * History bound (README "History bounds"): the only signals are the policy servers' `policyServerReady` (one per server start),
 * and each `agent` configuration adds about 20 events once (serve, retrieve, reap) before the pairs start; each
 * pair adds about 6 events, and the lanes stop taking pairs once Temporal suggests continue-as-new (4,096 events
 * by default), so a run's history stays below 4,096 + 6 × concurrency + a few dozen events however many pairs the
 * study has.
 */
export async function downstream(input: DownstreamInput): Promise<DownstreamResult> {
  const { validateConfig } = proxyActivities<Activities>(activityOptions('short'));
  const config = await validateConfig(input);
  const settings = requireDownstreamSection(config);
  const overrides = config.temporal.activityTimeouts as TimeoutOverrides;
  const { planDownstream, runDownstreamPair, summarizeDownstream } = downstreamActivities(overrides, settings);
  const tracker = new StageTracker(config.runId, config.recipe, downstreamStages);
  const common = { runId: config.runId, runDir: config.runDir };

  tracker.start('plan');
  const given = input.artifacts?.predictions ?? {};
  const predictions = await retrieveAgentSources(config, settings, overrides, given);
  const planned = await planDownstream({
    ...common,
    downstream: settings,
    instancesFile: settings.instancesFile ?? config.inputs.instances,
    predictions,
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
  // The continued run reads the policies' files it was handed, and serves none of them again.
  if (runs.left > 0)
    await continueAsNew<typeof downstream>(predictions === given ? input : { ...input, artifacts: { ...input.artifacts, predictions } });
  tracker.finish('runs', 'completed', `${runs.ran} run now (${runs.resolved} resolved), ${planned.finished} reused`);

  tracker.start('summary');
  const summary = await summarizeDownstream({ ...common, plan: planned.plan, bootstrap: settings.bootstrap });
  tracker.finish('summary', 'completed', resolveRates(summary));
  tracker.complete();
  return { ...summary, plan: planned.plan, pairs: planned.total, ran: runs.ran, reusedBeforeStart: planned.finished };
}

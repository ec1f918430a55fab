import { ActivityFailure, ApplicationFailure, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ArtifactRef } from '../schemas/artifact-ref';
import type { PipelineConfigInput } from '../schemas/config';
import type { EvaluateShardOutput, EvaluationPlan, EvaluationResult, RetrieverPlan } from '../schemas/evaluation';
import type { AgentRetrieverConfig, EvaluationConfig, RetrieverConfig } from '../schemas/evaluation/config';
import type { ResolvedConfig } from '../lib/config';
import { PolicyServers, policyServeRequest, servedRetriever } from './policy-server';
import { activityOptions, type TimeoutOverrides } from './activity-options';
import { settleAll, shardCounter, stageSamples, trackedStep, validatedConfig } from './helpers';
import { StageTracker } from './stage-tracker';
import { rootMessage } from '../lib/errors/root-message';

export const evaluationStages = ['plan', 'predict', 'report'] as const;

export type EvaluationInput = PipelineConfigInput & {
  artifacts?: { samples?: ArtifactRef };
  /** A sub-folder of `evaluation/` for this execution, set by its parent (a training run's validation of one checkpoint). */
  outputLabel?: string;
};

/** `20250102T030000Z`: a folder name for one execution, stable across replays (the workflow's start time). */
function executionLabel(start: Date): string {
  return start
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
}

/** One retriever's shards as they settled, or why it never ran (its policy could not be served). */
type RetrieverOutcome = { name: string; settled: PromiseSettledResult<EvaluateShardOutput>[] } | { name: string; failure: string };

/**
 * The settled shards, retriever by retriever: a retriever with a failed shard is reported with the reason and
 * left out; the others' shard refs go to the summary. A failure that is not an activity's is rethrown.
 */
function shardsByRetriever(outcomes: readonly RetrieverOutcome[]) {
  const failedRetrievers: { name: string; reason: string }[] = [];
  const shards: { retriever: string; refs: ArtifactRef[] }[] = [];
  let cached = 0;
  let failedShards = 0;
  for (const outcome of outcomes) {
    if ('failure' in outcome) {
      failedRetrievers.push({ name: outcome.name, reason: outcome.failure });
      continue;
    }
    const own = outcome.settled;
    const failure = own.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    failedShards += own.filter((s) => s.status === 'rejected').length;
    if (failure) {
      if (!(failure.reason instanceof ActivityFailure)) throw failure.reason; // cancellation, or a bug in this workflow
      failedRetrievers.push({ name: outcome.name, reason: rootMessage(failure.reason) });
      continue;
    }
    const outputs = own.map((s) => (s as PromiseFulfilledResult<EvaluateShardOutput>).value);
    cached += outputs.filter((o) => o.cached).length;
    shards.push({ retriever: outcome.name, refs: outputs.map((o) => o.shard) });
  }
  return { shards, failedRetrievers, cached, failedShards };
}

type TrainedPolicyRetriever = AgentRetrieverConfig & { policy: NonNullable<AgentRetrieverConfig['policy']> };

function isTrainedPolicy(retriever: RetrieverConfig): retriever is TrainedPolicyRetriever {
  return retriever.kind === 'agent' && retriever.policy !== undefined && retriever.served === undefined;
}

/** What every step of one evaluation reads: the run config, the stage table, the samples and the plan. */
interface EvaluationRun {
  config: ResolvedConfig;
  overrides: TimeoutOverrides;
  tracker: StageTracker;
  common: { runId: string; runDir: string };
  samples: ArtifactRef;
  outputLabel: string | null;
  plan: EvaluationPlan;
}

/** The settleAll tasks of the shards of `retrievers`, each evaluated with `evaluation`. */
type ShardJobs = (retrievers: readonly RetrieverPlan[], evaluation: EvaluationConfig) => (() => Promise<EvaluateShardOutput>)[];

/** A trained policy's retriever as it ran: planned again with its checkpoint, and served (or why it could not be). */
type ServedOutcome = { plan: RetrieverPlan; retriever: AgentRetrieverConfig; outcome: RetrieverOutcome };

/**
 * Retrieval-quality evaluation (docs/design.md "Retrieval evaluation"; CodeGrep §4.2, Table 2; CodeScout §4.2, Table 3, App. G):
 * samples with ground truth ──plan──▶ retrievers × instance shards ──predict + score──▶ shard Parquet
 * ──summary──▶ predictions, per-instance metrics, summary.json, report.md, report.html.
 * A retriever whose shards fail is reported and left out; the others' results are kept.
 *
 * History bound (README "History bounds"): no signals reach this workflow, so its history is about 6 events per shard
 * activity (scheduled, started, completed, and a workflow task when it completes) plus a few dozen: it grows
 * with retrievers × shards, never with time. Temporal's 51,200-event limit allows about 8,000 shards (at the
 * default shard size, 400,000 instances per retriever).
 */
export async function evaluation(input: EvaluationInput): Promise<EvaluationResult> {
  const { config, overrides } = await validatedConfig(input);
  const { planEvaluation } = proxyActivities<Activities>(activityOptions('short'));
  const { summarizeEvaluation } = proxyActivities<Activities>(activityOptions('evaluation', overrides));

  const tracker = new StageTracker(config.runId, config.recipe, evaluationStages);
  const common = { runId: config.runId, runDir: config.runDir };
  const samples = await stageSamples(input, config.runDir, 'environment');
  const evaluationConfig = config.evaluation;

  const outputLabel = input.outputLabel ?? (evaluationConfig.outputPerRun ? executionLabel(workflowInfo().startTime) : null);
  const plan = await trackedStep(
    tracker,
    'plan',
    () => planEvaluation({ ...common, samples, evaluation: evaluationConfig, outputLabel }),
    (p) => `${p.instances} instances × ${p.retrievers.length} retrievers in ${p.shardCount} shards`,
  );
  const predicted = await predictStep({ config, overrides, tracker, common, samples, outputLabel, plan });
  const { shards, failedRetrievers, cached, failedShards, total } = predicted;

  const summary = await trackedStep(
    tracker,
    'report',
    () => summarizeEvaluation({ ...common, samples, evaluation: predicted.evaluation, plan: predicted.plan, shards, failedRetrievers }),
    (s) => s.report.markdown,
  );
  tracker.complete();
  return {
    ...summary,
    outputDir: plan.outputDir,
    shards: { total, cached, computed: total - cached - failedShards, failed: failedShards },
  };
}

/**
 * The predict step: every retriever's shards, the trained policies' served one at a time beside the others. Its
 * result is what ran: the shards by retriever, and the plan and config as they ran (a served policy's replanned).
 */
async function predictStep(run: EvaluationRun) {
  const { tracker, plan } = run;
  const evaluationConfig = run.config.evaluation;
  tracker.start('predict');
  const policyRetrievers = evaluationConfig.retrievers.filter(isTrainedPolicy);
  const total = plan.retrievers.length * plan.shardCount;
  const shardJobs = evaluationShardJobs(run, shardCounter(tracker, 'predict', total));
  const policyNames = new Set(policyRetrievers.map((r) => r.name));
  const plainPlans = plan.retrievers.filter((r) => !policyNames.has(r.name));
  const plainSettled = settleAll(shardJobs(plainPlans, evaluationConfig), evaluationConfig.maxConcurrentShards);
  const policyOutcomes = await servePolicyRetrievers(run, policyRetrievers, shardJobs);
  const ran = inConfigOrder(evaluationConfig.retrievers, policyOutcomes, plainPlans, await plainSettled, plan.shardCount);

  const byRetriever = shardsByRetriever(ran.outcomes);
  finishPredict(tracker, byRetriever, total);
  return {
    ...byRetriever,
    total,
    plan: { ...plan, retrievers: ran.plans },
    evaluation: policyRetrievers.length > 0 ? { ...evaluationConfig, retrievers: ran.retrievers } : evaluationConfig,
  };
}

/** Shard tasks for `settleAll`; progress is counted here, as shards settle (a running shard heartbeats its own). */
function evaluationShardJobs(run: EvaluationRun, counted: ReturnType<typeof shardCounter>): ShardJobs {
  const { evaluateShard } = proxyActivities<Activities>(activityOptions('evaluation', run.overrides));
  const { shardCount } = run.plan;
  return (retrievers, evaluation) =>
    retrievers.flatMap((retriever) =>
      Array.from({ length: shardCount }, (_, shardIndex) =>
        counted(() => evaluateShard({ ...run.common, samples: run.samples, evaluation, retriever, shardIndex, shardCount })),
      ),
    );
}

/**
 * Trained policies are served one at a time (one GPU, one checkpoint), beside the other retrievers' shards; a
 * served retriever is planned again with its checkpoint, so its shards' folder names that checkpoint. A policy
 * that could not be served is an outcome with the reason, against its first plan.
 */
async function servePolicyRetrievers(
  run: EvaluationRun,
  policyRetrievers: readonly TrainedPolicyRetriever[],
  shardJobs: ShardJobs,
): Promise<Map<string, ServedOutcome>> {
  const policyOutcomes = new Map<string, ServedOutcome>();
  if (policyRetrievers.length === 0) return policyOutcomes;
  const { planEvaluation } = proxyActivities<Activities>(activityOptions('short'));
  const { config, common, samples, outputLabel, plan } = run;
  const evaluationConfig = config.evaluation;
  const servers = new PolicyServers(run.overrides);
  const serving = evaluationConfig.policyServer;
  for (const retriever of policyRetrievers) {
    try {
      await servers.serve(policyServeRequest(config, retriever, serving), async (ready) => {
        const resolved = servedRetriever(retriever, ready);
        const own = { ...evaluationConfig, retrievers: [resolved] };
        const replanned = await planEvaluation({ ...common, samples, evaluation: own, outputLabel });
        const settled = await settleAll(shardJobs(replanned.retrievers, own), evaluationConfig.maxConcurrentShards);
        policyOutcomes.set(retriever.name, {
          plan: replanned.retrievers[0]!,
          retriever: resolved,
          outcome: { name: retriever.name, settled },
        });
      });
    } catch (error) {
      if (!(error instanceof ActivityFailure || error instanceof ApplicationFailure)) throw error;
      const placeholder = plan.retrievers.find((r) => r.name === retriever.name)!;
      policyOutcomes.set(retriever.name, {
        plan: placeholder,
        retriever,
        outcome: { name: retriever.name, failure: `its policy could not be served: ${rootMessage(error)}` },
      });
    }
  }
  return policyOutcomes;
}

/**
 * Every retriever's plan, outcome and the config it ran with (a trained policy's: served), back in config order;
 * the plain retrievers' shards settled together, `shardCount` of them each, in their plans' order.
 */
function inConfigOrder(
  configured: readonly RetrieverConfig[],
  policyOutcomes: ReadonlyMap<string, ServedOutcome>,
  plainPlans: readonly RetrieverPlan[],
  plainOutcomes: PromiseSettledResult<EvaluateShardOutput>[],
  shardCount: number,
) {
  let plainIndex = 0;
  const outcomes: RetrieverOutcome[] = [];
  const plans: RetrieverPlan[] = [];
  const retrievers: RetrieverConfig[] = [];
  for (const retriever of configured) {
    const served = policyOutcomes.get(retriever.name);
    if (served) {
      outcomes.push(served.outcome);
      plans.push(served.plan);
      retrievers.push(served.retriever);
      continue;
    }
    const own = plainPlans[plainIndex]!;
    outcomes.push({ name: own.name, settled: plainOutcomes.slice(plainIndex * shardCount, (plainIndex + 1) * shardCount) });
    plans.push(own);
    retrievers.push(retriever);
    plainIndex += 1;
  }
  return { outcomes, plans, retrievers };
}

/** Closes the predict step with its note; with no retriever finished the stage fails, naming each one's reason. */
function finishPredict(tracker: StageTracker, byRetriever: ReturnType<typeof shardsByRetriever>, total: number): void {
  const { shards, failedRetrievers, cached, failedShards } = byRetriever;
  const note = `${total - failedShards} of ${total} shards (${cached} cached)${failedRetrievers.length > 0 ? `; failed: ${failedRetrievers.map((f) => f.name).join(', ')}` : ''}`;
  if (shards.length === 0) {
    tracker.finish('predict', 'failed', note);
    throw ApplicationFailure.create({
      type: 'EvaluationFailed',
      nonRetryable: true,
      message: `no retriever finished: ${failedRetrievers.map((f) => `${f.name}: ${f.reason}`).join('; ')}`,
    });
  }
  tracker.finish('predict', failedShards > 0 ? 'failed' : cached === total ? 'cached' : 'completed', note);
}

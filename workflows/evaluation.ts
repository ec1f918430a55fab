import { ActivityFailure, ApplicationFailure, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { RUN_ARTIFACTS } from '../lib/paths/run-artifacts';
import type { ArtifactRef } from '../schemas/artifact-ref';
import type { PipelineConfigInput } from '../schemas/config';
import type { EvaluateShardOutput, EvaluationResult, RetrieverPlan } from '../schemas/evaluation';
import type { AgentRetrieverConfig, EvaluationConfig, RetrieverConfig } from '../schemas/evaluation/config';
import { PolicyServers, policyServeRequest, servedRetriever } from './policy-server';
import { activityOptions } from './activity-options';
import { settleAll, trackedStep, validatedConfig } from './helpers';
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
  const { findRunArtifact, planEvaluation } = proxyActivities<Activities>(activityOptions('short'));
  const { evaluateShard, summarizeEvaluation } = proxyActivities<Activities>(activityOptions('evaluation', overrides));

  const tracker = new StageTracker(config.runId, config.recipe, evaluationStages);
  const common = { runId: config.runId, runDir: config.runDir };
  const samples =
    input.artifacts?.samples ??
    (await findRunArtifact({ runDir: config.runDir, relativePath: RUN_ARTIFACTS.environmentSamples, producedBy: 'environment' }));
  const evaluationConfig = config.evaluation;

  const outputLabel = input.outputLabel ?? (evaluationConfig.outputPerRun ? executionLabel(workflowInfo().startTime) : null);
  const plan = await trackedStep(
    tracker,
    'plan',
    () => planEvaluation({ ...common, samples, evaluation: evaluationConfig, outputLabel }),
    (p) => `${p.instances} instances × ${p.retrievers.length} retrievers in ${p.shardCount} shards`,
  );

  tracker.start('predict');
  const policyRetrievers = evaluationConfig.retrievers.filter(isTrainedPolicy);
  const total = plan.retrievers.length * plan.shardCount;
  // Progress is counted here, as shards finish (a running shard heartbeats its own instance count).
  let settledShards = 0;
  const showProgress = () => tracker.progress({ stage: 'predict', done: settledShards, total, unit: 'shards', counts: {} });
  showProgress();
  const shardJobs = (retrievers: readonly RetrieverPlan[], evaluation: EvaluationConfig) =>
    retrievers.flatMap((retriever) =>
      Array.from({ length: plan.shardCount }, (_, shardIndex) => async () => {
        try {
          return await evaluateShard({ ...common, samples, evaluation, retriever, shardIndex, shardCount: plan.shardCount });
        } finally {
          settledShards += 1;
          showProgress();
        }
      }),
    );
  const policyNames = new Set(policyRetrievers.map((r) => r.name));
  const plainPlans = plan.retrievers.filter((r) => !policyNames.has(r.name));
  const plainSettled = settleAll(shardJobs(plainPlans, evaluationConfig), evaluationConfig.maxConcurrentShards);
  // Trained policies are served one at a time (one GPU, one checkpoint), beside the other retrievers' shards; a
  // served retriever is planned again with its checkpoint, so its shards' folder names that checkpoint.
  const policyOutcomes = new Map<string, { plan: RetrieverPlan; retriever: AgentRetrieverConfig; outcome: RetrieverOutcome }>();
  if (policyRetrievers.length > 0) {
    const servers = new PolicyServers(overrides);
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
  }
  const plainOutcomes = await plainSettled;
  // Back in config order: every retriever's plan, outcome and (for a trained policy) the config it ran with.
  let plainIndex = 0;
  const outcomes: RetrieverOutcome[] = [];
  const retrieverPlans: RetrieverPlan[] = [];
  const retrievers: RetrieverConfig[] = [];
  for (const retriever of evaluationConfig.retrievers) {
    const served = policyOutcomes.get(retriever.name);
    if (served) {
      outcomes.push(served.outcome);
      retrieverPlans.push(served.plan);
      retrievers.push(served.retriever);
      continue;
    }
    const own = plainPlans[plainIndex]!;
    outcomes.push({ name: own.name, settled: plainOutcomes.slice(plainIndex * plan.shardCount, (plainIndex + 1) * plan.shardCount) });
    retrieverPlans.push(own);
    retrievers.push(retriever);
    plainIndex += 1;
  }
  const ranPlan = { ...plan, retrievers: retrieverPlans };
  const ranEvaluation = policyRetrievers.length > 0 ? { ...evaluationConfig, retrievers } : evaluationConfig;

  const { shards, failedRetrievers, cached, failedShards } = shardsByRetriever(outcomes);
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

  const summary = await trackedStep(
    tracker,
    'report',
    () => summarizeEvaluation({ ...common, samples, evaluation: ranEvaluation, plan: ranPlan, shards, failedRetrievers }),
    (s) => s.report.markdown,
  );
  tracker.complete();
  return {
    ...summary,
    outputDir: plan.outputDir,
    shards: { total, cached, computed: total - cached - failedShards, failed: failedShards },
  };
}

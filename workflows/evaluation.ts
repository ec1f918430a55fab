import { ActivityFailure, ApplicationFailure, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type * as activities from '../activities';
import type { ArtifactRef } from '../schemas/artifact-ref';
import type { PipelineConfigInput } from '../schemas/config';
import type { EvaluateShardOutput, EvaluationResult } from '../schemas/evaluation';
import { activityOptions } from './activity-options';
import { settleAll, trackedStep, validatedConfig } from './helpers';
import { StageTracker } from './stage-tracker';
import { rootMessage } from '../lib/errors/root-message';

export const evaluationStages = ['plan', 'predict', 'report'] as const;

export type EvaluationInput = PipelineConfigInput & { artifacts?: { samples?: ArtifactRef } };

/** `20250102T030000Z`: a folder name for one execution, stable across replays (the workflow's start time). */
function executionLabel(start: Date): string {
  return start
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
}

/**
 * The settled shards, retriever by retriever: a retriever with a failed shard is reported with the reason and
 * left out; the others' shard refs go to the summary. A failure that is not an activity's is rethrown.
 */
function shardsByRetriever(
  retrievers: readonly { name: string }[],
  shardCount: number,
  settled: readonly PromiseSettledResult<EvaluateShardOutput>[],
) {
  const failedRetrievers: { name: string; reason: string }[] = [];
  const shards: { retriever: string; refs: ArtifactRef[] }[] = [];
  let cached = 0;
  let failedShards = 0;
  retrievers.forEach((retriever, r) => {
    const own = settled.slice(r * shardCount, (r + 1) * shardCount);
    const failure = own.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    failedShards += own.filter((s) => s.status === 'rejected').length;
    if (failure) {
      if (!(failure.reason instanceof ActivityFailure)) throw failure.reason; // cancellation, or a bug in this workflow
      failedRetrievers.push({ name: retriever.name, reason: rootMessage(failure.reason) });
      return;
    }
    const outputs = own.map((s) => (s as PromiseFulfilledResult<EvaluateShardOutput>).value);
    cached += outputs.filter((o) => o.cached).length;
    shards.push({ retriever: retriever.name, refs: outputs.map((o) => o.shard) });
  });
  return { shards, failedRetrievers, cached, failedShards };
}

/**
 * Retrieval-quality evaluation (SPEC §5; CodeGrep §4.2, Table 2; CodeScout §4.2, Table 3, App. G):
 * samples with ground truth ──plan──▶ retrievers × instance shards ──predict + score──▶ shard Parquet
 * ──summary──▶ predictions, per-instance metrics, summary.json, report.md, report.html.
 * A retriever whose shards fail is reported and left out; the others' results are kept.
 *
 * History bound (issue #12): no signals reach this workflow, so its history is about 6 events per shard
 * activity (scheduled, started, completed, and a workflow task when it completes) plus a few dozen: it grows
 * with retrievers × shards, never with time. Temporal's 51,200-event limit allows about 8,000 shards (at the
 * default shard size, 400,000 instances per retriever).
 */
export async function evaluation(input: EvaluationInput): Promise<EvaluationResult> {
  const { config, overrides } = await validatedConfig(input);
  const { findRunArtifact, planEvaluation } = proxyActivities<typeof activities>(activityOptions('short'));
  const { evaluateShard, summarizeEvaluation } = proxyActivities<typeof activities>(activityOptions('evaluation', overrides));

  const tracker = new StageTracker(config.runId, config.recipe, evaluationStages);
  const common = { runId: config.runId, runDir: config.runDir };
  const samples =
    input.artifacts?.samples ??
    (await findRunArtifact({ runDir: config.runDir, relativePath: 'environment/samples.parquet', producedBy: 'environment' }));
  const evaluationConfig = config.evaluation;

  const outputLabel = evaluationConfig.outputPerRun ? executionLabel(workflowInfo().startTime) : null;
  const plan = await trackedStep(
    tracker,
    'plan',
    () => planEvaluation({ ...common, samples, evaluation: evaluationConfig, outputLabel }),
    (p) => `${p.instances} instances × ${p.retrievers.length} retrievers in ${p.shardCount} shards`,
  );

  tracker.start('predict');
  const total = plan.retrievers.length * plan.shardCount;
  // Progress is counted here, as shards finish (a running shard heartbeats its own instance count).
  let settledShards = 0;
  const showProgress = () => tracker.progress({ stage: 'predict', done: settledShards, total, unit: 'shards', counts: {} });
  showProgress();
  const jobs = plan.retrievers.flatMap((retriever) =>
    Array.from({ length: plan.shardCount }, (_, shardIndex) => async () => {
      try {
        return await evaluateShard({
          ...common,
          samples,
          evaluation: evaluationConfig,
          retriever,
          shardIndex,
          shardCount: plan.shardCount,
        });
      } finally {
        settledShards += 1;
        showProgress();
      }
    }),
  );
  const settled = await settleAll(jobs, evaluationConfig.maxConcurrentShards);

  const { shards, failedRetrievers, cached, failedShards } = shardsByRetriever(plan.retrievers, plan.shardCount, settled);
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
    () => summarizeEvaluation({ ...common, samples, evaluation: evaluationConfig, plan, shards, failedRetrievers }),
    (s) => s.report.markdown,
  );
  tracker.complete();
  return {
    ...summary,
    outputDir: plan.outputDir,
    shards: { total, cached, computed: total - cached - failedShards, failed: failedShards },
  };
}

import { ChildWorkflowFailure, ApplicationFailure, executeChild, patched, proxyActivities, ParentClosePolicy, upsertMemo } from '@temporalio/workflow';
import type * as activities from '../activities';
import type { CatmResult } from '../schemas/catm';
import type { PipelineConfigInput, PipelineStage } from '../schemas/config';
import type { DownstreamResult } from '../schemas/downstream-config';
import type { EnvironmentResult } from '../schemas/environment';
import type { EvaluationResult } from '../schemas/evaluation';
import type { TrainingResult } from '../schemas/training/workflow';
import { activityOptions } from './activity-options';
import { catm } from './catm';
import { downstream } from './downstream';
import { environment } from './environment';
import { evaluation } from './evaluation';
import { training } from './training';
import { StageTracker } from './stage-tracker';
import { rootMessage } from '../lib/errors/root-message';

export interface StageOutcome {
  stage: string;
  status: 'completed' | 'failed' | 'skipped';
  /** Why it failed or was skipped. */
  reason: string | null;
}

export interface PipelineResult {
  runId: string;
  outcomes: StageOutcome[];
  catm: CatmResult | null;
  environment: EnvironmentResult | null;
  training: TrainingResult | null;
  evaluation: EvaluationResult | null;
  downstream: DownstreamResult | null;
}

/**
 * The whole study as in SPEC §1. Each stage is a child workflow with id `<runId>/<stage>`, run in order. A
 * stage that fails is reported with its reason, the stages that need its output are skipped, and the others
 * still run. A pipeline with a failed or skipped stage ends Failed (`PipelineStageFailed`), its details the
 * `PipelineResult` with every stage's outcome, so a partial run says what ran and what did not.
 *
 * History bound (issue #12): nothing signals the pipeline (the CLI queries the stage workflows it lists in
 * `progress.children`), so its history is a fixed number of events per stage (about 10 for a child
 * workflow, its search-attribute upserts and workflow tasks): under 100 events for the five stages, however
 * long they run.
 */
export async function pipeline(input: PipelineConfigInput): Promise<PipelineResult> {
  const { validateConfig } = proxyActivities<typeof activities>(activityOptions('short'));
  const config = await validateConfig(input);
  const tracker = new StageTracker(config.runId, config.recipe, config.stages);
  upsertMemo({ config: { runId: config.runId, recipe: config.recipe, stages: config.stages, inputs: config.inputs, judge: config.judge.mode } });

  const result: PipelineResult = { runId: config.runId, outcomes: [], catm: null, environment: null, training: null, evaluation: null, downstream: null };
  const failed = new Set<string>();

  async function stage<T>(name: PipelineStage, needs: string[], run: (workflowId: string) => Promise<T>): Promise<T | null> {
    if (!config.stages.includes(name)) return null;
    const blocker = needs.find((need) => failed.has(need));
    if (blocker) {
      failed.add(name);
      tracker.finish(name, 'skipped', `needs ${blocker}, which failed`);
      result.outcomes.push({ stage: name, status: 'skipped', reason: `needs ${blocker}, which failed` });
      return null;
    }
    const workflowId = `${config.runId}/${name}`;
    tracker.child(name, workflowId);
    tracker.start(name);
    try {
      const value = await run(workflowId);
      tracker.finish(name, 'completed');
      result.outcomes.push({ stage: name, status: 'completed', reason: null });
      return value;
    } catch (error) {
      if (!(error instanceof ChildWorkflowFailure)) throw error; // cancellation, or a bug in this workflow
      failed.add(name);
      const reason = rootMessage(error);
      tracker.finish(name, 'failed', reason.slice(0, 300));
      result.outcomes.push({ stage: name, status: 'failed', reason });
      return null;
    }
  }

  const childOptions = (workflowId: string, stageName: string) => ({
    workflowId,
    parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
    memo: { stage: stageName, runId: config.runId },
  });

  result.catm = await stage('catm', [], (workflowId) => executeChild(catm, { ...childOptions(workflowId, 'catm'), args: [config] }));
  result.environment = await stage('environment', ['catm'], (workflowId) =>
    executeChild(environment, {
      ...childOptions(workflowId, 'environment'),
      args: [{ ...config, artifacts: result.catm ? { samples: result.catm.samples } : undefined }],
    }),
  );
  // GRPO on the GPU worker (task queue codegrep-gpu): segments of steps, resumable from checkpoints.
  result.training = await stage('training', ['environment'], (workflowId) =>
    executeChild(training, {
      ...childOptions(workflowId, 'training'),
      args: [{ ...config, artifacts: result.environment ? { samples: result.environment.samples } : undefined }],
    }),
  );
  result.evaluation = await stage('evaluation', ['environment'], (workflowId) =>
    executeChild(evaluation, {
      ...childOptions(workflowId, 'evaluation'),
      args: [{ ...config, artifacts: result.environment ? { samples: result.environment.samples } : undefined }],
    }),
  );
  result.downstream = await stage('downstream', ['environment', 'evaluation'], (workflowId) => {
    // Configurations that name no predictions file read the evaluation stage's predictions (their retriever's rows).
    const fromEvaluation = result.evaluation?.predictions;
    const predictions = Object.fromEntries(
      (config.downstream?.configurations ?? [])
        .filter((c) => c.source === 'predictions' && !c.predictions && fromEvaluation)
        .map((c) => [c.name, fromEvaluation!]),
    );
    return executeChild(downstream, { ...childOptions(workflowId, 'downstream'), args: [{ ...config, artifacts: { predictions } }] });
  });

  tracker.complete();
  const notCompleted = result.outcomes.filter((o) => o.status !== 'completed');
  // Runs started before this change completed with a failed stage; replaying their histories must still do so.
  if (notCompleted.length > 0 && patched('pipeline-fails-when-a-stage-fails')) {
    // Failed in Temporal (red in the Web UI's list), with every stage's outcome and the finished stages' results
    // in the failure's details: `codegrep run` prints them as it prints a completed run's.
    throw ApplicationFailure.create({
      type: 'PipelineStageFailed',
      nonRetryable: true,
      message: `${notCompleted.length} of ${result.outcomes.length} stages did not complete: ${notCompleted.map((o) => `${o.stage} ${o.status}${o.reason ? ` (${o.reason.slice(0, 300)})` : ''}`).join('; ')}`,
      details: [result],
    });
  }
  if (result.outcomes.length > 0 && result.outcomes.every((o) => o.status !== 'completed')) {
    throw ApplicationFailure.create({ type: 'PipelineFailed', nonRetryable: true, message: `no stage completed: ${result.outcomes.map((o) => `${o.stage}: ${o.reason}`).join('; ')}` });
  }
  return result;
}

import { ChildWorkflowFailure, ApplicationFailure, executeChild, patched, ParentClosePolicy, upsertMemo } from '@temporalio/workflow';
import type { ResolvedConfig } from '../lib/config';
import type { ArtifactRef } from '../schemas/artifact-ref';
import type { CatmResult } from '../schemas/catm';
import type { PipelineConfigInput, PipelineStage } from '../schemas/config';
import type { DownstreamResult } from '../schemas/downstream';
import type { EnvironmentResult } from '../schemas/environment';
import type { EvaluationResult } from '../schemas/evaluation';
import type { RftResult } from '../schemas/rft';
import type { TrainingResult } from '../schemas/training/workflow';
import { catm } from './catm';
import { downstream } from './downstream';
import { environment } from './environment';
import { evaluation } from './evaluation';
import { validatedConfig } from './helpers';
import { training } from './training';
import { rft } from './rft';
import { StageTracker } from './stage-tracker';
import { rootMessage } from '../lib/errors/root-message';

export interface StageOutcome {
  stage: string;
  status: 'completed' | 'failed' | 'skipped';
  /** Why it failed or was skipped. */
  reason: string | null;
}

interface StageResults {
  catm: CatmResult;
  environment: EnvironmentResult;
  training: TrainingResult;
  rft: RftResult;
  evaluation: EvaluationResult;
  downstream: DownstreamResult;
}
type Finished = { [K in PipelineStage]: StageResults[K] | null };

export type PipelineResult = { runId: string; outcomes: StageOutcome[] } & Finished;

/** One row of the pipeline's table: a stage, the stages whose output it needs, its child workflow and its input. */
interface PipelineStep<K extends PipelineStage, I> {
  stage: K;
  needs: PipelineStage[];
  workflow: (input: I) => Promise<StageResults[K]>;
  input: (config: ResolvedConfig, finished: Finished) => I;
}
const step = <K extends PipelineStage, I>(row: PipelineStep<K, I>) => row;

/** The environment's samples (with ground truth), for the stages that read them. */
const withEnvironmentSamples = (
  config: ResolvedConfig,
  finished: Finished,
): PipelineConfigInput & { artifacts?: { samples?: ArtifactRef } } => ({
  ...config,
  artifacts: finished.environment ? { samples: finished.environment.samples } : undefined,
});

/**
 * Training after an RFT stage (CodeScout §4.1): RL on the samples RFT did not see, from the RFT checkpoint
 * (the trainer's `init_from`: its weights, a fresh optimizer and schedule).
 */
function trainingInput(config: ResolvedConfig, finished: Finished): ReturnType<typeof withEnvironmentSamples> {
  const own = withEnvironmentSamples(config, finished);
  if (!finished.rft || !config.training) return own;
  const warm = finished.rft;
  return {
    ...own,
    training: { ...config.training, trainer: { ...config.training.trainer, init_from: warm.checkpoint } },
    artifacts: { samples: warm.trainingSamples },
  };
}

/** Configurations that name no predictions file read the evaluation stage's predictions (their retriever's rows). */
function evaluationPredictions(config: ResolvedConfig, finished: Finished): Record<string, ArtifactRef> {
  const fromEvaluation = finished.evaluation?.predictions;
  return Object.fromEntries(
    (config.downstream?.configurations ?? [])
      .filter((c) => c.source === 'predictions' && !c.predictions && fromEvaluation)
      .map((c) => [c.name, fromEvaluation!]),
  );
}

/** docs/design.md "The pipeline", in order. */
const pipelineSteps = [
  step({ stage: 'catm', needs: [], workflow: catm, input: (config) => config }),
  step({
    stage: 'environment',
    needs: ['catm'],
    workflow: environment,
    input: (config, finished) => ({ ...config, artifacts: finished.catm ? { samples: finished.catm.samples } : undefined }),
  }),
  // CodeScout §4.1's RFT warm start: teacher rollouts, the perfect ones fine-tuned on (GPU worker).
  step({ stage: 'rft', needs: ['environment'], workflow: rft, input: withEnvironmentSamples }),
  // GRPO on the GPU worker (task queue codegrep-gpu): segments of steps, resumable from checkpoints.
  step({ stage: 'training', needs: ['environment', 'rft'], workflow: training, input: trainingInput }),
  step({ stage: 'evaluation', needs: ['environment'], workflow: evaluation, input: withEnvironmentSamples }),
  step({
    stage: 'downstream',
    needs: ['environment', 'evaluation'],
    workflow: downstream,
    input: (config, finished) => ({ ...config, artifacts: { predictions: evaluationPredictions(config, finished) } }),
  }),
];

/**
 * The whole study as in docs/design.md "The pipeline". Each stage is a child workflow with id `<runId>/<stage>`, run in order. A
 * stage that fails is reported with its reason, the stages that need its output are skipped, and the others
 * still run. A pipeline with a failed or skipped stage ends Failed (`PipelineStageFailed`), its details the
 * `PipelineResult` with every stage's outcome, so a partial run says what ran and what did not.
 *
 * History bound (README "History bounds"): nothing signals the pipeline (the CLI queries the stage workflows it lists in
 * `progress.children`), so its history is a fixed number of events per stage (about 10 for a child
 * workflow, its search-attribute upserts and workflow tasks): under 100 events for the five stages, however
 * long they run.
 */
export async function pipeline(input: PipelineConfigInput): Promise<PipelineResult> {
  const { config } = await validatedConfig(input);
  const tracker = new StageTracker(config.runId, config.recipe, config.stages);
  upsertMemo({
    config: { runId: config.runId, recipe: config.recipe, stages: config.stages, inputs: config.inputs, judge: config.judge.mode },
  });

  const result: PipelineResult = {
    runId: config.runId,
    outcomes: [],
    catm: null,
    environment: null,
    training: null,
    rft: null,
    evaluation: null,
    downstream: null,
  };
  const failed = new Set<string>();
  const outcome = (stage: PipelineStage, status: StageOutcome['status'], reason: string | null) => {
    if (status !== 'completed') failed.add(stage);
    tracker.finish(stage, status, reason === null ? undefined : reason.slice(0, 300));
    result.outcomes.push({ stage, status, reason });
  };

  for (const { stage, needs, workflow, input: stageInput } of pipelineSteps) {
    if (!config.stages.includes(stage)) continue;
    const blocker = needs.find((need) => failed.has(need));
    if (blocker) {
      outcome(stage, 'skipped', `needs ${blocker}, which failed`);
      continue;
    }
    const workflowId = `${config.runId}/${stage}`;
    tracker.child(stage, workflowId);
    tracker.start(stage);
    try {
      const value = await executeChild(workflow as (input: unknown) => Promise<unknown>, {
        workflowId,
        parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
        memo: { stage, runId: config.runId },
        args: [stageInput(config, result)],
      });
      Object.assign(result, { [stage]: value });
      outcome(stage, 'completed', null);
    } catch (error) {
      if (!(error instanceof ChildWorkflowFailure)) throw error; // cancellation, or a bug in this workflow
      outcome(stage, 'failed', rootMessage(error));
    }
  }

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
    throw ApplicationFailure.create({
      type: 'PipelineFailed',
      nonRetryable: true,
      message: `no stage completed: ${result.outcomes.map((o) => `${o.stage}: ${o.reason}`).join('; ')}`,
    });
  }
  return result;
}

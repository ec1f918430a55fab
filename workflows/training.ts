import {
  ActivityCancellationType,
  ChildWorkflowFailure,
  ParentClosePolicy,
  executeChild,
  allHandlersFinished,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  defineUpdate,
  proxyActivities,
  setHandler,
  upsertMemo,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { RUN_ARTIFACTS } from '../lib/paths/run-artifacts';
import { effectiveAlgorithm } from '../lib/recipes';
import type { ArtifactRef } from '../schemas/artifact-ref';
import type { PipelineConfigInput } from '../schemas/config';
import { TRAINING_MESSAGES, type TrainingProgress, type TrainingStatus } from '../schemas/training/messages';
import type { TrainingCarry, TrainingResult } from '../schemas/training/workflow';
import { activityOptions, type TimeoutOverrides } from './activity-options';
import { missingSection, stageSamples, validatedConfig } from './helpers';
import { StageTracker } from './stage-tracker';
import { evaluation } from './evaluation';
import { validationMetricValue } from '../lib/training/validation-choice';
import { rootMessage } from '../lib/errors/root-message';
import type { ValidationRow } from '../schemas/training/validation';
import { TrainingRun, type RunConfig, type TrainingSection } from './training-run';

/** `training` matches the pipeline's stage name, so a parent pipeline shows the step progress too. */
export const trainingStages = ['training', 'report'] as const;

// The messages that steer a run; their names and payloads are in schemas/training/messages.ts.
export const pauseSignal = defineSignal(TRAINING_MESSAGES.pause);
export const resumeSignal = defineSignal(TRAINING_MESSAGES.resume);
export const stopAfterCheckpointSignal = defineSignal(TRAINING_MESSAGES.stopAfterCheckpoint);
export const trainingProgressSignal = defineSignal<[TrainingProgress]>(TRAINING_MESSAGES.trainingProgress);
export const setStepBudgetUpdate = defineUpdate<TrainingStatus, [number]>(TRAINING_MESSAGES.setStepBudget);
export const trainingStatusQuery = defineQuery<TrainingStatus>(TRAINING_MESSAGES.trainingStatus);

export type TrainingInput = PipelineConfigInput & {
  artifacts?: { samples?: ArtifactRef };
  /** Set by continue-as-new: where the previous run of this workflow left off. */
  carried?: TrainingCarry;
};

/**
 * Multi-day GRPO training (docs/design.md "Training", "Temporal conventions"): samples + worktrees ──GRPO on the GPU worker, in
 * segments of `segmentSteps` steps──▶ LoRA checkpoints + per-step metrics ──▶ report with the curves of
 * CodeGrep Fig. 2 / Fig. 4. Each segment is one activity on the GPU task queue that resumes from the newest
 * checkpoint; `pause`, `resume`, `stopAfterCheckpoint` and the `setStepBudget` update steer the loop, and
 * the workflow continues as new when Temporal suggests it, carrying its state.
 *
 * History bound (README "History bounds"): between segments the loop checks `continueAsNewSuggested` (the server suggests
 * it at 4,096 events or 4 MiB by default). One segment adds about 10 events for its activity and workflow
 * tasks plus at most 4 per `trainingProgress` signal, and the segment activity sends at most 2 signals per
 * step of the segment across all its attempts (lib/training `ProgressThrottle`); each steering
 * signal or update adds about 4. So a run's history stays below 4,096 + 8 × segmentSteps + 4 × (steering
 * messages in one segment) + a few dozen events, whatever the number of steps or days.
 */
export async function training(input: TrainingInput): Promise<TrainingResult> {
  const { inspectTrainingRun, writeTrainingReport, recordValidation } = proxyActivities<Activities>(activityOptions('short'));
  const { config, overrides } = await validatedConfig(input);
  const t = trainingSection(config);
  const trainSegment = segmentActivity(t, overrides);
  const tracker = new StageTracker(config.runId, config.recipe, trainingStages);
  upsertMemo({ config: runMemo(config, t) });

  const { samples, split, store, segmentSamples } = await trainingSamples(input, config, t);
  const onDisk = store ? { runDir: config.runDir, runId: config.runId, store: store.uri } : { runDir: config.runDir };
  const run = new TrainingRun(config, t, tracker, input.carried ?? (await startingPoint(onDisk, t.steps, inspectTrainingRun)));
  steerByMessages(run);

  const validate =
    split && t.validation
      ? async (step: number) => {
          run.recordValidation(await validateCheckpoint(input, config, t.validation!, split.validation, step));
          await recordValidation({ runDir: config.runDir, rows: run.validations });
        }
      : null;
  const trained = await run.train(
    (segment) =>
      trainSegment({
        runId: config.runId,
        runDir: config.runDir,
        trainingWorkflowId: workflowInfo().workflowId,
        samples: segmentSamples,
        training: t,
        ...(store ? { store } : {}),
        ...segment,
      }),
    validate,
  );
  if (trained === 'continue-as-new') {
    await condition(allHandlersFinished);
    return continueAsNew<typeof training>({
      ...input,
      artifacts: { ...input.artifacts, samples },
      carried: { ...run.state, runs: run.state.runs + 1 },
    });
  }
  const report = await run.report(writeTrainingReport);
  await condition(allHandlersFinished);
  return run.result(report);
}

/** The config's `training` section: the workflow cannot run without one. */
function trainingSection(config: RunConfig): TrainingSection {
  if (config.training) return config.training;
  throw missingSection(
    'the training workflow needs a `training` section in the run config (schemas/training/config.ts), with at least modelDir and steps',
  );
}

/** The segment activity, on the GPU task queue. */
function segmentActivity(t: TrainingSection, overrides: TimeoutOverrides): Activities['trainSegment'] {
  const { trainSegment } = proxyActivities<Activities>({
    ...activityOptions('training', overrides),
    taskQueue: t.gpuTaskQueue,
    // A cancelled segment stops its trainer at a checkpoint and reports the step it reached.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  });
  return trainSegment;
}

/** The run's settings in the workflow's memo, so a list of runs shows what each one trains. */
function runMemo(config: RunConfig, t: TrainingSection) {
  return {
    runId: config.runId,
    recipe: t.recipe,
    algorithm: effectiveAlgorithm(t),
    steps: t.steps,
    segmentSteps: t.segmentSteps,
    model: t.modelDir,
    smokeRun: t.smokeRun,
  };
}

/**
 * The samples the segments train on: the stage's samples less the held-out ones when the run validates (refused
 * when they share a commit), published to the run store first when there is one.
 */
async function trainingSamples(input: TrainingInput, config: RunConfig, t: TrainingSection) {
  const { splitValidation, publishToStore } = proxyActivities<Activities>(activityOptions('short'));
  const samples = await stageSamples(input, config.runDir, 'environment');
  const split = t.validation ? await splitValidation({ runDir: config.runDir, samples, validation: t.validation }) : null;
  const trainingSamples = split?.training ?? samples;
  // With a run store (README "Deployment: several machines") the samples reach it first and the GPU segments run shared-nothing.
  const store = config.store ? { uri: config.store, repoSource: config.environment.repoSource } : null;
  const segmentSamples = store
    ? await publishToStore({ store: store.uri, runId: config.runId, key: RUN_ARTIFACTS.environmentSamples, ref: trainingSamples })
    : trainingSamples;
  return { samples, split, store, segmentSamples };
}

/** The run's signals, query and update, each answered by the run's state. */
function steerByMessages(run: TrainingRun): void {
  setHandler(trainingStatusQuery, () => run.status());
  setHandler(pauseSignal, () => run.pause());
  setHandler(resumeSignal, () => run.resume());
  setHandler(stopAfterCheckpointSignal, () => run.stopAfterCheckpoint());
  setHandler(trainingProgressSignal, (progress) => run.onProgress(progress));
  setHandler(setStepBudgetUpdate, (budget) => run.setBudget(budget), { validator: (budget) => run.validateBudget(budget) });
}

const stepLabel = (step: number) => `step-${String(step).padStart(8, '0')}`;

/**
 * One checkpoint's validation: the `evaluation` workflow as a child, on the held-out samples, with the run's
 * own checkpoint at `step` as its only retriever (served by the GPU worker between two segments, so the
 * server and the trainer never share the GPU). A child that fails is recorded as a checkpoint without a value.
 */
async function validateCheckpoint(
  input: TrainingInput,
  config: RunConfig,
  validation: NonNullable<TrainingSection['validation']>,
  heldOut: ArtifactRef,
  step: number,
): Promise<ValidationRow> {
  const { carried: _carried, ...pipelineInput } = input;
  const row: ValidationRow = {
    step,
    metric: validation.metric,
    value: null,
    instances: 0,
    failed: 0,
    adapterSha256: '',
    servedModel: '',
    evaluationDir: `${config.runDir}/evaluation/validation-${stepLabel(step)}`,
  };
  try {
    const result = await executeChild(evaluation, {
      workflowId: `${config.runId}/validation/${stepLabel(step)}`,
      parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
      args: [
        {
          ...pipelineInput,
          artifacts: { samples: heldOut },
          outputLabel: `validation-${stepLabel(step)}`,
          evaluation: {
            ...config.evaluation,
            instances: undefined,
            outputPerRun: false,
            retrievers: [
              { name: 'validation', kind: 'agent', policy: { run: config.runId, checkpoint: step }, concurrency: 4, timeoutMs: 120_000 },
            ],
          },
        },
      ],
    });
    const retriever = result.summaryValues.retrievers[0];
    const served = result.summaryValues.servedPolicies[0];
    return {
      ...row,
      value: retriever ? validationMetricValue(retriever, validation.metric) : null,
      instances: retriever?.instances ?? 0,
      failed: retriever?.failed ?? 0,
      adapterSha256: served?.adapterSha256 ?? '',
      servedModel: served?.model ?? '',
      evaluationDir: result.outputDir,
    };
  } catch (error) {
    if (!(error instanceof ChildWorkflowFailure)) throw error;
    return { ...row, servedModel: `validation failed: ${rootMessage(error).slice(0, 200)}` };
  }
}

/** A fresh workflow starts where the run directory's newest checkpoint is (a run continued by a new workflow). */
async function startingPoint(
  where: Parameters<Activities['inspectTrainingRun']>[0],
  budget: number,
  inspectTrainingRun: Activities['inspectTrainingRun'],
): Promise<TrainingCarry> {
  const disk = await inspectTrainingRun(where);
  const state: TrainingCarry = {
    step: disk.checkpointStep ?? 0,
    budget,
    checkpointStep: disk.checkpointStep,
    checkpoint: disk.checkpoint,
    segment: disk.lastSegment,
    paused: false,
    stopRequested: false,
    latest: null,
    notes: [],
    runs: 0,
  };
  if (disk.checkpointStep !== null)
    state.notes.push(`continued from the checkpoint at step ${disk.checkpointStep} already in the run directory`);
  return state;
}

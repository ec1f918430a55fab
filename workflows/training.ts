import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  allHandlersFinished,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  defineUpdate,
  isCancellation,
  proxyActivities,
  setHandler,
  upsertMemo,
  workflowInfo,
} from '@temporalio/workflow';
import type * as activities from '../activities';
import { effectiveAlgorithm } from '../lib/recipes';
import type { ArtifactRef } from '../schemas/artifact-ref';
import type { PipelineConfigInput } from '../schemas/config';
import type { TrainSegmentResult, TrainingCarry, TrainingProgress, TrainingResult, TrainingStatus } from '../schemas/training';
import { activityOptions, type TimeoutOverrides } from './activity-options';
import { StageTracker } from './stage-tracker';

/** `training` matches the pipeline's stage name, so a parent pipeline shows the step progress too. */
export const trainingStages = ['training', 'report'] as const;

/** Stop the running segment at a checkpoint and wait for `resume`. */
export const pauseSignal = defineSignal('pause');
export const resumeSignal = defineSignal('resume');
/** Stop the running segment at a checkpoint, then write the report and finish. */
export const stopAfterCheckpointSignal = defineSignal('stopAfterCheckpoint');
/** From the segment activity: the newest step and checkpoint (throttled). */
export const trainingProgressSignal = defineSignal<[TrainingProgress]>('trainingProgress');
/** Change the step budget; refused below the current step. Returns the status after the change. */
export const setStepBudgetUpdate = defineUpdate<TrainingStatus, [number]>('setStepBudget');
export const trainingStatusQuery = defineQuery<TrainingStatus>('trainingStatus');

export type TrainingInput = PipelineConfigInput & {
  artifacts?: { samples?: ArtifactRef };
  /** Set by continue-as-new: where the previous run of this workflow left off. */
  carried?: TrainingCarry;
};

/**
 * Multi-day GRPO training (SPEC §5 "Training", §6): samples + worktrees ──GRPO on the GPU worker, in
 * segments of `segmentSteps` steps──▶ LoRA checkpoints + per-step metrics ──▶ report with the curves of
 * CodeGrep Fig. 2 / Fig. 4. Each segment is one activity on the GPU task queue that resumes from the newest
 * checkpoint; `pause`, `resume`, `stopAfterCheckpoint` and the `setStepBudget` update steer the loop, and
 * the workflow continues as new when Temporal suggests it, carrying its state.
 *
 * History bound (issue #12): between segments the loop checks `continueAsNewSuggested` (the server suggests
 * it at 4,096 events or 4 MiB by default). One segment adds about 10 events for its activity and workflow
 * tasks plus at most 4 per `trainingProgress` signal, and the segment activity sends at most 2 signals per
 * step of the segment across all its attempts (activities/training.ts `TrainingSignals`); each steering
 * signal or update adds about 4. So a run's history stays below 4,096 + 8 × segmentSteps + 4 × (steering
 * messages in one segment) + a few dozen events, whatever the number of steps or days.
 */
export async function training(input: TrainingInput): Promise<TrainingResult> {
  const { validateConfig, findRunArtifact, inspectTrainingRun, writeTrainingReport } = proxyActivities<typeof activities>(activityOptions('short'));
  const config = await validateConfig(input);
  const t = config.training;
  if (!t) {
    throw ApplicationFailure.create({
      type: 'ConfigError',
      nonRetryable: true,
      message: 'the training workflow needs a `training` section in the run config (schemas/training.ts), with at least modelDir and steps',
    });
  }
  const overrides = config.temporal.activityTimeouts as TimeoutOverrides;
  const { trainSegment } = proxyActivities<typeof activities>({
    ...activityOptions('training', overrides),
    taskQueue: t.gpuTaskQueue,
    // A cancelled segment stops its trainer at a checkpoint and reports the step it reached.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  });
  const tracker = new StageTracker(config.runId, config.recipe, trainingStages);
  upsertMemo({ config: { runId: config.runId, recipe: t.recipe, algorithm: effectiveAlgorithm(t), steps: t.steps, segmentSteps: t.segmentSteps, model: t.modelDir, smokeRun: t.smokeRun } });

  const samples =
    input.artifacts?.samples ?? (await findRunArtifact({ runDir: config.runDir, relativePath: 'environment/samples.parquet', producedBy: 'environment' }));
  // store (issue #13): with a store, the samples reach it first and the GPU segment runs shared-nothing
  const store = config.store ? { uri: config.store, repoSource: config.environment.repoSource } : null;
  const { publishToStore } = proxyActivities<typeof activities>(activityOptions('short'));
  const segmentSamples = store ? await publishToStore({ store: store.uri, runId: config.runId, key: 'environment/samples.parquet', ref: samples }) : samples;
  let state: TrainingCarry;
  if (input.carried) {
    state = input.carried;
  } else {
    const disk = await inspectTrainingRun({ runDir: config.runDir, ...(store ? { runId: config.runId, store: store.uri } : {}) }); // store (issue #13)
    state = {
      step: disk.checkpointStep ?? 0,
      budget: t.steps,
      checkpointStep: disk.checkpointStep,
      checkpoint: disk.checkpoint,
      segment: disk.lastSegment,
      paused: false,
      stopRequested: false,
      latest: null,
      notes: [],
      runs: 0,
    };
    if (disk.checkpointStep !== null) state.notes.push(`continued from the checkpoint at step ${disk.checkpointStep} already in the run directory`);
  }
  let phase: TrainingStatus['state'] = 'training';
  let running: { scope: CancellationScope; target: number } | null = null;
  let interrupted: 'pause' | 'stop' | 'budget' | null = null;

  const status = (): TrainingStatus => ({
    runId: config.runId,
    step: state.step,
    budget: state.budget,
    checkpointStep: state.checkpointStep,
    checkpoint: state.checkpoint,
    segment: state.segment,
    state: phase === 'training' && state.paused ? 'paused' : phase === 'training' && state.stopRequested ? 'stopping' : phase,
    segmentRunning: running !== null,
    paused: state.paused,
    stopRequested: state.stopRequested,
    latest: state.latest,
    recipe: t.recipe,
    algorithm: effectiveAlgorithm(t),
    smokeRun: t.smokeRun,
    notes: state.notes,
  });
  const showProgress = () => {
    const latest = state.latest;
    const counts: Record<string, number> = { segment: state.segment };
    if (state.checkpointStep !== null) counts.checkpointStep = state.checkpointStep;
    if (latest) Object.assign(counts, { reward: latest.rewardMean, turns: latest.turnsMean, completionTokens: latest.completionLenMean }, latest.kl === null ? {} : { kl: latest.kl });
    tracker.progress({ stage: 'training', done: state.step, total: state.budget, unit: 'steps', counts });
  };
  const interrupt = (why: 'pause' | 'stop' | 'budget') => {
    if (running && interrupted === null) {
      interrupted = why;
      running.scope.cancel();
    }
  };
  setHandler(trainingStatusQuery, status);
  setHandler(pauseSignal, () => {
    state.paused = true;
    interrupt('pause');
  });
  setHandler(resumeSignal, () => {
    state.paused = false;
  });
  setHandler(stopAfterCheckpointSignal, () => {
    state.stopRequested = true;
    interrupt('stop');
  });
  setHandler(trainingProgressSignal, (progress) => {
    if (progress.segment !== state.segment) return; // a late signal of a finished segment
    state.step = progress.step;
    state.checkpointStep = progress.checkpointStep;
    if (progress.latest) state.latest = progress.latest;
    showProgress();
  });
  setHandler(
    setStepBudgetUpdate,
    (budget) => {
      state.budget = budget;
      showProgress();
      if (running && budget < running.target) interrupt('budget');
      return status();
    },
    {
      validator: (budget) => {
        if (!Number.isInteger(budget) || budget < 1) throw new Error(`the step budget must be a positive integer, got ${budget}`);
        if (phase !== 'training') throw new Error(`training is over (${phase}): the budget can no longer change`);
        if (budget < state.step) throw new Error(`the step budget ${budget} is below the current step ${state.step}`);
      },
    },
  );

  tracker.start('training');
  showProgress();
  let segmentsThisRun = 0;
  let modelParameters: number | null = null;
  while (!state.stopRequested && state.step < state.budget) {
    if (state.paused) {
      await condition(() => !state.paused || state.stopRequested);
      continue;
    }
    if (workflowInfo().continueAsNewSuggested || (t.maxSegmentsPerRun !== undefined && segmentsThisRun >= t.maxSegmentsPerRun)) {
      await condition(allHandlersFinished);
      return continueAsNew<typeof training>({ ...input, artifacts: { ...input.artifacts, samples }, carried: { ...state, runs: state.runs + 1 } });
    }
    state.segment += 1;
    segmentsThisRun += 1;
    const target = Math.min(state.step + t.segmentSteps, state.budget);
    const scope = new CancellationScope();
    running = { scope, target };
    interrupted = null;
    let result: TrainSegmentResult | null = null;
    try {
      result = await scope.run(() =>
        trainSegment({
          runId: config.runId,
          runDir: config.runDir,
          trainingWorkflowId: workflowInfo().workflowId,
          samples: segmentSamples, // store (issue #13)
          ...(store ? { store } : {}), // store (issue #13)
          training: t,
          segment: state.segment,
          fromStep: state.step,
          targetStep: target,
          totalSteps: state.budget,
        }),
      );
    } catch (error) {
      // Our own interruption of a segment that had not started (or confirmed it by failing) is no failure.
      if (!(interrupted !== null && isCancellation(error))) {
        tracker.finish('training', 'failed', `segment ${state.segment} (steps ${state.step}→${target}) failed`);
        throw error;
      }
    } finally {
      running = null;
    }
    if (result) {
      state.step = result.step;
      state.checkpoint = result.checkpoint;
      state.checkpointStep = result.checkpoint === null ? null : result.step;
      state.latest = result.latest ?? state.latest;
      modelParameters = result.trainerParameters ?? modelParameters;
      showProgress();
    }
    if (state.step > state.budget) {
      state.notes.push(`the trainer had already reached step ${state.step} when the budget was lowered to ${state.budget}: the run ends at step ${state.step}`);
      state.budget = state.step;
    }
  }

  tracker.finish('training', 'completed', `${state.step} of ${state.budget} steps${state.step < state.budget ? ' (stopped after a checkpoint)' : ''}`);
  phase = 'reporting';
  tracker.start('report');
  if (modelParameters !== null && t.smokeRun) state.notes.push(`smoke run: the model has ${modelParameters} parameters`);
  const report = await writeTrainingReport({
    runId: config.runId,
    runDir: config.runDir,
    step: state.step,
    recipe: t.recipe,
    algorithm: effectiveAlgorithm(t),
    budget: state.budget,
    stoppedEarly: state.step < state.budget,
    smokeRun: t.smokeRun,
    modelDir: t.modelDir,
    notes: state.notes,
    ...(store ? { store: store.uri } : {}), // store (issue #13)
  });
  tracker.finish('report', 'completed', `${report.steps} steps, ${report.plots.length} plots`);
  phase = 'done';
  tracker.complete();
  await condition(allHandlersFinished);
  return {
    runId: config.runId,
    step: state.step,
    budget: state.budget,
    stoppedEarly: state.step < state.budget,
    checkpoint: state.checkpoint,
    segments: state.segment,
    report,
    notes: state.notes,
  };
}

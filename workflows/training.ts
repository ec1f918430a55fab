import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  ChildWorkflowFailure,
  ParentClosePolicy,
  executeChild,
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
import type { Activities } from '../activities';
import { RUN_ARTIFACTS } from '../lib/paths/run-artifacts';
import { effectiveAlgorithm } from '../lib/recipes';
import type { ArtifactRef } from '../schemas/artifact-ref';
import type { PipelineConfigInput } from '../schemas/config';
import type { TrainSegmentResult, TrainingProgress, TrainingReportOutput } from '../schemas/training/activity-io';
import type { TrainingCarry, TrainingResult, TrainingStatus } from '../schemas/training/workflow';
import { activityOptions, type TimeoutOverrides } from './activity-options';
import { StageTracker } from './stage-tracker';
import { evaluation } from './evaluation';
import { bestValidatedStep, patienceExhausted, validationMetricValue } from '../lib/training/validation-choice';
import { rootMessage } from '../lib/errors/root-message';
import type { ValidationRow } from '../schemas/training/validation';

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
  const { validateConfig, findRunArtifact, inspectTrainingRun, writeTrainingReport, publishToStore, splitValidation, recordValidation } =
    proxyActivities<Activities>(activityOptions('short'));
  const config = await validateConfig(input);
  const t = config.training;
  if (!t) {
    throw ApplicationFailure.create({
      type: 'ConfigError',
      nonRetryable: true,
      message:
        'the training workflow needs a `training` section in the run config (schemas/training/config.ts), with at least modelDir and steps',
    });
  }
  const overrides = config.temporal.activityTimeouts as TimeoutOverrides;
  const { trainSegment } = proxyActivities<Activities>({
    ...activityOptions('training', overrides),
    taskQueue: t.gpuTaskQueue,
    // A cancelled segment stops its trainer at a checkpoint and reports the step it reached.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  });
  const tracker = new StageTracker(config.runId, config.recipe, trainingStages);
  upsertMemo({
    config: {
      runId: config.runId,
      recipe: t.recipe,
      algorithm: effectiveAlgorithm(t),
      steps: t.steps,
      segmentSteps: t.segmentSteps,
      model: t.modelDir,
      smokeRun: t.smokeRun,
    },
  });

  const samples =
    input.artifacts?.samples ??
    (await findRunArtifact({ runDir: config.runDir, relativePath: RUN_ARTIFACTS.environmentSamples, producedBy: 'environment' }));
  // With validation the held-out samples are taken out of the training samples (refused when they share a commit).
  const split = t.validation ? await splitValidation({ runDir: config.runDir, samples, validation: t.validation }) : null;
  const trainingSamples = split?.training ?? samples;
  // With a run store (README "Deployment: several machines") the samples reach it first and the GPU segments run shared-nothing.
  const store = config.store ? { uri: config.store, repoSource: config.environment.repoSource } : null;
  const segmentSamples = store
    ? await publishToStore({ store: store.uri, runId: config.runId, key: RUN_ARTIFACTS.environmentSamples, ref: trainingSamples })
    : trainingSamples;
  const onDisk = store ? { runDir: config.runDir, runId: config.runId, store: store.uri } : { runDir: config.runDir };
  const run = new TrainingRun(config, t, tracker, input.carried ?? (await startingPoint(onDisk, t.steps, inspectTrainingRun)));
  setHandler(trainingStatusQuery, () => run.status());
  setHandler(pauseSignal, () => run.pause());
  setHandler(resumeSignal, () => run.resume());
  setHandler(stopAfterCheckpointSignal, () => run.stopAfterCheckpoint());
  setHandler(trainingProgressSignal, (progress) => run.onProgress(progress));
  setHandler(setStepBudgetUpdate, (budget) => run.setBudget(budget), { validator: (budget) => run.validateBudget(budget) });

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

type RunConfig = Awaited<ReturnType<Activities['validateConfig']>>;

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
type TrainingSection = NonNullable<RunConfig['training']>;
type SegmentRequest = { segment: number; fromStep: number; targetStep: number; totalSteps: number };

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

/**
 * One training workflow's state and the messages that steer it (in the style of the Temporal sample
 * `safe-message-handlers`: a class owns the state, each handler is a method, the workflow function wires them).
 * The loop runs a segment at a time; a handler that must stop the running segment cancels its scope.
 */
class TrainingRun {
  private phase: TrainingStatus['state'] = 'training';
  private running: { scope: CancellationScope; target: number } | null = null;
  private interrupted: 'pause' | 'stop' | 'budget' | null = null;
  private modelParameters: number | null = null;
  /** The validated checkpoints (carried across continue-as-new). */
  readonly validations: ValidationRow[];

  constructor(
    private readonly config: RunConfig,
    private readonly t: TrainingSection,
    private readonly tracker: StageTracker,
    /** What a continuation carries on (see TrainingCarry). */
    readonly state: TrainingCarry,
  ) {
    this.validations = state.validations ?? [];
    state.validations = this.validations;
  }

  /** A validated checkpoint; with `patience`, stop once that many validations brought no new best. */
  recordValidation(row: ValidationRow): void {
    this.validations.push(row);
    const v = this.t.validation;
    if (v && patienceExhausted(this.validations, v.patience) && !this.state.stopRequested) {
      this.state.stopRequested = true;
      this.state.notes.push(
        `validation: no better ${v.metric} in ${v.patience} validations after step ${bestValidatedStep(this.validations)}; training stopped at step ${row.step}`,
      );
    }
  }

  status(): TrainingStatus {
    const { state, phase, t } = this;
    return {
      runId: this.config.runId,
      step: state.step,
      budget: state.budget,
      checkpointStep: state.checkpointStep,
      checkpoint: state.checkpoint,
      segment: state.segment,
      state: phase === 'training' && state.paused ? 'paused' : phase === 'training' && state.stopRequested ? 'stopping' : phase,
      segmentRunning: this.running !== null,
      paused: state.paused,
      stopRequested: state.stopRequested,
      latest: state.latest,
      recipe: t.recipe,
      algorithm: effectiveAlgorithm(t),
      smokeRun: t.smokeRun,
      notes: state.notes,
    };
  }

  pause(): void {
    this.state.paused = true;
    this.interrupt('pause');
  }

  resume(): void {
    this.state.paused = false;
  }

  stopAfterCheckpoint(): void {
    this.state.stopRequested = true;
    this.interrupt('stop');
  }

  onProgress(progress: TrainingProgress): void {
    if (progress.segment !== this.state.segment) return; // a late signal of a finished segment
    this.state.step = progress.step;
    this.state.checkpointStep = progress.checkpointStep;
    if (progress.latest) this.state.latest = progress.latest;
    this.showProgress();
  }

  validateBudget(budget: number): void {
    if (!Number.isInteger(budget) || budget < 1) throw new Error(`the step budget must be a positive integer, got ${budget}`);
    if (this.phase !== 'training') throw new Error(`training is over (${this.phase}): the budget can no longer change`);
    if (budget < this.state.step) throw new Error(`the step budget ${budget} is below the current step ${this.state.step}`);
  }

  setBudget(budget: number): TrainingStatus {
    this.state.budget = budget;
    this.showProgress();
    if (this.running && budget < this.running.target) this.interrupt('budget');
    return this.status();
  }

  /** Segments until the budget is reached or a stop was asked for; or until the history should continue as new. */
  async train(
    trainSegment: (segment: SegmentRequest) => Promise<TrainSegmentResult>,
    validate: ((step: number) => Promise<void>) | null = null,
  ): Promise<'finished' | 'continue-as-new'> {
    const { state, t, tracker } = this;
    tracker.start('training');
    this.showProgress();
    let segmentsThisRun = 0;
    while (!state.stopRequested && state.step < state.budget) {
      if (state.paused) {
        await condition(() => !state.paused || state.stopRequested);
        continue;
      }
      if (workflowInfo().continueAsNewSuggested || (t.maxSegmentsPerRun !== undefined && segmentsThisRun >= t.maxSegmentsPerRun))
        return 'continue-as-new';
      state.segment += 1;
      segmentsThisRun += 1;
      const every = validate ? t.validation?.every : undefined;
      const before = state.step;
      // With validation a segment ends at the next validated step, so the checkpoint there exists and is evaluated.
      const target = Math.min(state.step + t.segmentSteps, state.budget, ...(every ? [(Math.floor(state.step / every) + 1) * every] : []));
      const scope = new CancellationScope();
      this.running = { scope, target };
      this.interrupted = null;
      let result: TrainSegmentResult | null = null;
      try {
        result = await scope.run(() =>
          trainSegment({ segment: state.segment, fromStep: state.step, targetStep: target, totalSteps: state.budget }),
        );
      } catch (error) {
        // Our own interruption of a segment that had not started (or confirmed it by failing) is no failure.
        if (!(this.interrupted !== null && isCancellation(error))) {
          tracker.finish('training', 'failed', `segment ${state.segment} (steps ${state.step}→${target}) failed`);
          throw error;
        }
      } finally {
        this.running = null;
      }
      if (result) {
        state.step = result.step;
        state.checkpoint = result.checkpoint;
        state.checkpointStep = result.checkpoint === null ? null : result.step;
        state.latest = result.latest ?? state.latest;
        this.modelParameters = result.trainerParameters ?? this.modelParameters;
        this.showProgress();
      }
      if (validate && every !== undefined) {
        // A fast trainer may pass a validated step before the segment stops it: validate every due step it passed
        // (its checkpoint exists: checkpointEvery divides validation.every), and the last step of the run.
        const due: number[] = [];
        for (let next = (Math.floor(before / every) + 1) * every; next <= state.step; next += every) due.push(next);
        if (state.step >= state.budget && state.checkpointStep === state.step && !due.includes(state.step)) due.push(state.step);
        for (const step of due) if (!this.validations.some((v) => v.step === step)) await validate(step);
      }
      if (state.step > state.budget) {
        state.notes.push(
          `the trainer had already reached step ${state.step} when the budget was lowered to ${state.budget}: the run ends at step ${state.step}`,
        );
        state.budget = state.step;
      }
    }
    return 'finished';
  }

  /** The report of the finished run: metrics of every step, the curves, the notes. */
  async report(writeTrainingReport: Activities['writeTrainingReport']): Promise<TrainingReportOutput> {
    const { state, t, tracker } = this;
    tracker.finish(
      'training',
      'completed',
      `${state.step} of ${state.budget} steps${state.step < state.budget ? ' (stopped after a checkpoint)' : ''}`,
    );
    this.phase = 'reporting';
    tracker.start('report');
    if (this.modelParameters !== null && t.smokeRun) state.notes.push(`smoke run: the model has ${this.modelParameters} parameters`);
    const report = await writeTrainingReport({
      runId: this.config.runId,
      runDir: this.config.runDir,
      step: state.step,
      recipe: t.recipe,
      algorithm: effectiveAlgorithm(t),
      budget: state.budget,
      stoppedEarly: state.step < state.budget,
      smokeRun: t.smokeRun,
      modelDir: t.modelDir,
      notes: state.notes,
      ...(this.config.store ? { store: this.config.store } : {}),
      ...(this.validations.length > 0 ? { validation: this.validations } : {}),
    });
    tracker.finish('report', 'completed', `${report.steps} steps, ${report.plots.length} plots`);
    this.phase = 'done';
    tracker.complete();
    return report;
  }

  result(report: TrainingReportOutput): TrainingResult {
    const { state } = this;
    return {
      runId: this.config.runId,
      step: state.step,
      budget: state.budget,
      stoppedEarly: state.step < state.budget,
      checkpoint: state.checkpoint,
      segments: state.segment,
      report,
      notes: state.notes,
      ...(this.validations.length > 0 ? { validation: { rows: this.validations, bestStep: bestValidatedStep(this.validations) } } : {}),
    };
  }

  private showProgress(): void {
    const { state } = this;
    const latest = state.latest;
    const counts: Record<string, number> = { segment: state.segment };
    if (state.checkpointStep !== null) counts.checkpointStep = state.checkpointStep;
    if (latest)
      Object.assign(
        counts,
        { reward: latest.rewardMean, turns: latest.turnsMean, completionTokens: latest.completionLenMean },
        latest.kl === null ? {} : { kl: latest.kl },
      );
    this.tracker.progress({ stage: 'training', done: state.step, total: state.budget, unit: 'steps', counts });
  }

  private interrupt(why: 'pause' | 'stop' | 'budget'): void {
    if (this.running && this.interrupted === null) {
      this.interrupted = why;
      this.running.scope.cancel();
    }
  }
}

import { CancellationScope, condition, isCancellation, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { effectiveAlgorithm } from '../lib/recipes';
import { bestValidatedStep, patienceExhausted } from '../lib/training/validation-choice';
import type { TrainSegmentResult, TrainingReportOutput } from '../schemas/training/activity-io';
import { StepBudgetSchema, type TrainingProgress, type TrainingStatus } from '../schemas/training/messages';
import type { ValidationRow } from '../schemas/training/validation';
import type { TrainingCarry, TrainingResult } from '../schemas/training/workflow';
import type { StageTracker } from './stage-tracker';

/** The run config as validated by `validateConfig`, and its training section. */
export type RunConfig = Awaited<ReturnType<Activities['validateConfig']>>;
export type TrainingSection = NonNullable<RunConfig['training']>;
/** One segment the loop asks the GPU worker for. */
export type SegmentRequest = { segment: number; fromStep: number; targetStep: number; totalSteps: number };

/**
 * One training workflow's state and the messages that steer it (in the style of the Temporal sample
 * `safe-message-handlers`: a class owns the state, each handler is a method, the workflow function wires them).
 * The loop runs a segment at a time; a handler that must stop the running segment cancels its scope.
 */
export class TrainingRun {
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
    if (!StepBudgetSchema.safeParse(budget).success) throw new Error(`the step budget must be a positive integer, got ${budget}`);
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

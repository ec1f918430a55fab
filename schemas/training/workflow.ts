import type { ValidationRow } from './validation';
import type { TrainingAlgorithm, TrainingRecipe } from './config';
import type { LatestStepMetrics } from './metrics';
import type { TrainingReportOutput } from './activity-io';

/** The training workflow's query result, its continue-as-new carry and its result. */

export interface TrainingStatus {
  runId: string;
  /** Newest step done (reported by the running segment, confirmed by each segment's end). */
  step: number;
  budget: number;
  checkpointStep: number | null;
  checkpoint: string | null;
  segment: number;
  state: 'training' | 'paused' | 'stopping' | 'reporting' | 'done';
  /** Whether a segment activity (a trainer) is running now. */
  segmentRunning: boolean;
  paused: boolean;
  stopRequested: boolean;
  latest: LatestStepMetrics | null;
  recipe: TrainingRecipe;
  algorithm: TrainingAlgorithm;
  smokeRun: boolean;
  /** Things a user should know (a clamped budget, a checkpoint past the budget, …). */
  notes: string[];
}

/** What a training workflow hands to its continuation. */
export interface TrainingCarry {
  step: number;
  budget: number;
  checkpointStep: number | null;
  checkpoint: string | null;
  segment: number;
  paused: boolean;
  stopRequested: boolean;
  latest: LatestStepMetrics | null;
  notes: string[];
  runs: number;
  /** The validated checkpoints so far (training.validation). */
  validations?: ValidationRow[];
}

export interface TrainingResult {
  runId: string;
  step: number;
  budget: number;
  stoppedEarly: boolean;
  checkpoint: string | null;
  /** Number of the last segment (segments of earlier workflows on the same run directory count too). */
  segments: number;
  report: TrainingReportOutput;
  /** The validated checkpoints (training.validation) and the best of them by the validation metric. */
  validation?: { rows: ValidationRow[]; bestStep: number | null };
  notes: string[];
}

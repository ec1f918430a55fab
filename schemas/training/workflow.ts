import type { ValidationRow } from './validation';
import type { LatestStepMetrics } from './metrics';
import type { TrainingReportOutput } from './activity-io';

/** The training workflow's continue-as-new carry and its result; its query result is in ./messages. */
export type { TrainingStatus } from './messages';

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

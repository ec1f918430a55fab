import { z } from 'zod';

/** What a long activity reports (throttled) to the workflows that show its progress. */
export const StageProgressSchema = z.object({
  stage: z.string(),
  done: z.number().nonnegative(),
  total: z.number().nonnegative().nullable(),
  unit: z.string(),
  /** Small counters worth seeing live (e.g. RELEVANT / NOT_RELEVANT so far). */
  counts: z.record(z.string(), z.number()).default({}),
});
export type StageProgress = z.infer<typeof StageProgressSchema>;

export const StageStatusSchema = z.enum(['pending', 'running', 'completed', 'cached', 'failed', 'skipped']);
export type StageStatus = z.infer<typeof StageStatusSchema>;

export interface StageState {
  status: StageStatus;
  progress: StageProgress | null;
  startedAt: string | null;
  finishedAt: string | null;
  note: string | null;
}

/** Answer of the `progress` query of every codegrep workflow. */
export interface WorkflowProgress {
  runId: string;
  workflow: string;
  currentStage: string | null;
  stages: Record<string, StageState>;
  /** Child workflows started so far, by stage, so clients can query them too. */
  children: Record<string, string>;
  done: boolean;
}

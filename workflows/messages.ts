import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { StageProgress, WorkflowProgress } from '../schemas/progress';

/** Messages every codegrep workflow understands (see temporalio/samples-typescript `message-passing`). */
export const progressQuery = defineQuery<WorkflowProgress>('progress');
/** Sent (throttled) by long activities so the UI details and the CLI's progress bars stay current. */
export const stageProgressSignal = defineSignal<[StageProgress]>('stageProgress');

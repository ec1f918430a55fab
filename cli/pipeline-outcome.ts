import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { PipelineResult } from '../workflows/pipeline';

/**
 * The `PipelineResult` of a pipeline that ended Failed because a stage failed (`PipelineStageFailed`: its
 * details are the result with every stage's outcome), or null for any other error.
 */
export function pipelineResultOfFailure(error: unknown): PipelineResult | null {
  if (!(error instanceof WorkflowFailedError)) return null;
  const cause = error.cause;
  if (!(cause instanceof ApplicationFailure) || cause.type !== 'PipelineStageFailed') return null;
  const details = cause.details?.[0] as PipelineResult | undefined;
  return details && Array.isArray(details.outcomes) ? details : null;
}

/** Waits for a pipeline and returns its result, whether it completed or ended Failed with a failed stage. */
export async function pipelineOutcome(handle: WorkflowHandle): Promise<{ result: PipelineResult; failed: boolean }> {
  try {
    return { result: (await handle.result()) as PipelineResult, failed: false };
  } catch (error) {
    const result = pipelineResultOfFailure(error);
    if (result) return { result, failed: true };
    throw error;
  }
}

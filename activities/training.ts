import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApplicationFailure, CancelledFailure, Context } from '@temporalio/activity';
import * as training from '../lib/training';
import { TrainSegmentInputSchema, TrainingHeartbeatSchema } from '../schemas/training/activity-io';
import type { TrainSegmentInput, TrainSegmentResult, TrainingHeartbeat, TrainingProgress } from '../schemas/training/activity-io';
import { TRAINING_MESSAGES } from '../schemas/training/messages';
import { captureActivityLog, configError, invalidInput, nonRetryable, type ActivityDeps } from './kit';
import { keepHeartbeating, trainerExitFailure } from './kit/trainer';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * One training segment on the GPU worker (lib/training runTrainingSegment): the trainer runs until `targetStep`,
 * each step is heartbeated as `{ step, checkpoint }` and signalled (throttled) to the workflow.
 *
 * A retry (a killed worker, a crashed trainer) resumes from the newest complete checkpoint and its heartbeat
 * details. On cancellation the trainer gets SIGTERM, then SIGKILL after `stopGraceMs`; a cancellation the
 * workflow asked for (pause, stop, a lower budget) returns the checkpointed step normally, any other (worker
 * shutdown, timeout) fails the attempt so it is retried.
 */
export function makeTrainSegment(
  deps: Pick<ActivityDeps, 'client' | 'nodeDataDir' | 'env' | 'logger'>,
): (input: TrainSegmentInput) => Promise<TrainSegmentResult> {
  return (input) => trainSegment(deps, input);
}

/**
 * `trainSegment` with the worker's deps: progress is signalled through `deps.client` (none: heartbeats only); with a
 * store the segment trains under `deps.nodeDataDir`; the trainer starts with `deps.env`.
 */
async function trainSegment(
  deps: Pick<ActivityDeps, 'client' | 'nodeDataDir' | 'env' | 'logger'>,
  rawInput: TrainSegmentInput,
): Promise<TrainSegmentResult> {
  const input = TrainSegmentInputSchema.parse(rawInput);
  const context = Context.current();
  // Captured now: the trainer's force-kill, the store's push errors and the environment server log from callbacks
  // that may run outside this activity's async context or after it ended (activities/kit/activity-log.ts).
  const log = captureActivityLog(context, deps.logger);
  const previous = TrainingHeartbeatSchema.safeParse(context.info.heartbeatDetails);
  if (previous.success)
    log.info('training: retrying a segment from its last heartbeat', { segment: input.segment, heartbeat: previous.data });
  // Heartbeat from the start: reaping a stale trainer and starting a new one can take longer than the timeout.
  const beat: TrainingHeartbeat = previous.success
    ? previous.data
    : { step: input.fromStep, checkpoint: null, signalled: { step: input.fromStep, checkpointStep: 0 } };
  const { client } = deps;
  const workflowId = input.trainingWorkflowId;
  // Progress is best effort: a finished or unknown workflow must never fail the segment.
  const signal =
    client && workflowId
      ? (p: TrainingProgress) =>
          void client.workflow
            .getHandle(workflowId)
            .signal(TRAINING_MESSAGES.trainingProgress, p)
            .catch(() => undefined)
      : null;
  const progress = new training.SegmentProgress(beat, input.segment, input.training.progressEveryMs, {
    // A heartbeat after the end would belong to no attempt: dropped.
    heartbeat: (details) => (log.ended ? undefined : context.heartbeat(details)),
    signal,
  });
  progress.heartbeat();
  const stopHeartbeats = keepHeartbeating(context, () => progress.heartbeat());
  const cancelReason = () =>
    context.cancellationSignal.reason instanceof CancelledFailure ? context.cancellationSignal.reason.message : 'CANCELLED';
  try {
    const cancellation = context.cancellationSignal;
    const result = await training.runTrainingSegment(input, {
      attempt: context.info.attempt,
      startedAt: Date.now(),
      projectRoot,
      nodeDataDir: deps.nodeDataDir,
      env: deps.env,
      cancellation,
      progress,
      log,
    });
    // Not the workflow's request (worker shutdown, timeout): fail this attempt, the retry resumes from here.
    if (cancellation.aborted && cancelReason() !== 'CANCELLED') throw new CancelledFailure(cancelReason());
    return result;
  } catch (error) {
    if (error instanceof training.SegmentCancelledError) throw new CancelledFailure(cancelReason());
    if (error instanceof training.SegmentConfigError) throw configError(error.message);
    if (error instanceof training.NoTrainableSamplesError) throw invalidInput(error.message);
    if (error instanceof training.TrainerProtocolError) throw nonRetryable('TrainerProtocolError', error.message);
    // Retryable: the retry may land on another node; on this one it tries to stop the stuck process first.
    if (error instanceof training.TrainerUnkillableError)
      throw ApplicationFailure.create({ type: 'TrainerUnkillable', message: error.message });
    if (error instanceof training.TrainerExitError) throw trainerExitFailure(error);
    throw error;
  } finally {
    stopHeartbeats();
    log.end();
  }
}

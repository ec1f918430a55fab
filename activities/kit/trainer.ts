import { ApplicationFailure, type Context } from '@temporalio/activity';

// What the activities that run the Python trainer (a GRPO segment, the RFT fine-tune) share.

/**
 * Heartbeats with `beat` every third of the activity's heartbeat timeout (200 ms at least) while the trainer runs:
 * reaping a stale trainer, starting one and a slow step can each take longer than the timeout. Returns the stop.
 */
export function keepHeartbeating(context: Context, beat: () => void): () => void {
  const keepAlive = setInterval(beat, Math.max(200, (context.info.heartbeatTimeoutMs ?? 60_000) / 3));
  return () => clearInterval(keepAlive);
}

/** A trainer that exited with an error: a permanent exit (its config) fails for good, any other is retried. */
export function trainerExitFailure(error: { permanent: boolean; message: string }): ApplicationFailure {
  return ApplicationFailure.create({
    type: error.permanent ? 'TrainerConfigError' : 'TrainerFailed',
    nonRetryable: error.permanent,
    message: error.message,
  });
}

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CancelledFailure, Context } from '@temporalio/activity';
import * as rft from '../lib/rft';
import { FineTuneHeartbeatSchema, FineTuneRftInputSchema, type FineTuneRftInput, type FineTuneRftOutput } from '../schemas/rft';
import { captureActivityLog, configError, type ActivityDeps } from './kit';
import { keepHeartbeating, trainerExitFailure } from './kit/trainer';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * RFT's fine-tune on the GPU worker (lib/rft runSft): `python -m trainer.sft` on the kept trajectories, each step
 * heartbeated. A retry (a killed worker, a crashed trainer) reaps the trainer the last attempt left and resumes
 * from its newest checkpoint; a finished fine-tune is returned without starting the trainer again.
 */
export function makeFineTuneRft(deps: Pick<ActivityDeps, 'env' | 'logger'>): (input: FineTuneRftInput) => Promise<FineTuneRftOutput> {
  return (input) => fineTuneRft(deps, input);
}

/** `fineTuneRft` with the worker's deps: lines logged after the activity ended go to `deps.logger`. */
async function fineTuneRft(deps: Pick<ActivityDeps, 'env' | 'logger'>, rawInput: FineTuneRftInput): Promise<FineTuneRftOutput> {
  const input = FineTuneRftInputSchema.parse(rawInput);
  const context = Context.current();
  const log = captureActivityLog(context, deps.logger);
  const previous = FineTuneHeartbeatSchema.safeParse(context.info.heartbeatDetails);
  let latest = previous.success ? previous.data : { step: 0, checkpointStep: null };
  if (previous.success) log.info('rft: retrying the fine-tune from its last heartbeat', { heartbeat: latest });
  const beat = () => (log.ended ? undefined : context.heartbeat(latest));
  beat();
  const stopHeartbeats = keepHeartbeating(context, beat);
  try {
    return await rft.runSft(input, {
      projectRoot,
      env: deps.env,
      cancellation: context.cancellationSignal,
      onProgress: (progress) => {
        latest = progress;
        beat();
      },
      log,
    });
  } catch (error) {
    if (error instanceof rft.SftCancelledError) throw new CancelledFailure(error.message);
    if (error instanceof rft.SftConfigError) throw configError(error.message);
    if (error instanceof rft.SftExitError) throw trainerExitFailure(error);
    throw error;
  } finally {
    stopHeartbeats();
    log.end();
  }
}

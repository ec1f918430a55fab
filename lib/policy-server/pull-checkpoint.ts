import { existsSync } from 'node:fs';
import path from 'node:path';
import { pullDirectory, type ArtifactStore } from '../artifacts/store';
import { localTraining, pullTrainingRecords, stepDirName, storedCheckpointSteps, storeTraining } from '../store-sync';
import { CheckpointChoiceError, type CheckpointChoice } from './served-checkpoint';

/**
 * With a run store, a node with an empty data dir serves a checkpoint pulled from it: the training records
 * (each attempt's trainer config among them) and the chosen checkpoint's directory, through the marker the
 * segment wrote after its files (lib/store-sync), so a half-pushed checkpoint is never served.
 * Returns the step pulled.
 */
export async function pullServedCheckpoint(
  store: ArtifactStore,
  runId: string,
  localRunDir: string,
  choice: CheckpointChoice,
  bestStep: number | null,
): Promise<number> {
  await pullTrainingRecords(store, runId, localRunDir);
  const steps = await storedCheckpointSteps(store, runId);
  if (steps.length === 0) throw new CheckpointChoiceError(`run ${runId} has no checkpoint in the store ${store.root}`);
  const step = choice === 'latest' ? steps.at(-1)! : choice === 'best' ? bestStep : choice;
  if (step === null)
    throw new CheckpointChoiceError(`checkpoint: best needs validation metrics, and run ${runId} has none: choose latest or a step`);
  if (!steps.includes(step))
    throw new CheckpointChoiceError(
      `run ${runId} has no checkpoint at step ${step} in the store ${store.root} (it has ${steps.join(', ')})`,
    );
  const dir = path.join(localTraining(localRunDir).checkpoints, stepDirName(step));
  if (!existsSync(path.join(dir, 'COMPLETE'))) await pullDirectory(store, storeTraining(runId).marker(step), dir);
  return step;
}

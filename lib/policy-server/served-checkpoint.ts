import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { AnswerFormat } from '../../schemas/agent';
import { sha256File } from '../artifacts/sha256-file';
import { RUN_ARTIFACTS } from '../paths/run-artifacts';
import { RECIPE_PRESETS, type TrainerRecipeName } from '../recipes';
import { completeCheckpoints } from '../training/checkpoints';
import { attemptFiles, listSegments, segmentDir } from '../training/layout';

/** Which checkpoint of a run to serve: the newest, the best by validation metric, or a step. */
export type CheckpointChoice = 'latest' | 'best' | number;

/** A LoRA checkpoint's weights: the file whose sha256 names it (trainer/serve.py `adapter_sha256`). */
export const ADAPTER_WEIGHTS = 'adapter_model.safetensors';
/** What a `finetune: full` checkpoint holds instead: the whole model (or, sharded, its index). */
export const FULL_WEIGHTS = ['model.safetensors', 'model.safetensors.index.json'] as const;

/**
 * The file whose sha256 names a checkpoint: its LoRA adapter, or a full fine-tune's weights; null when the
 * directory holds neither. trainer/serve.py `weights_file` is its twin (the served policy reports the same sha256).
 */
export function checkpointWeightsFile(dir: string): string | null {
  for (const name of [ADAPTER_WEIGHTS, ...FULL_WEIGHTS]) if (existsSync(path.join(dir, name))) return path.join(dir, name);
  return null;
}

/** A checkpoint as served and recorded: every prediction row and report names these. */
export interface ServedCheckpoint {
  runId: string;
  step: number;
  /** The checkpoint directory on this node. */
  dir: string;
  /** sha256 of the checkpoint's weights (`checkpointWeightsFile`: the LoRA adapter, or a full fine-tune's model). */
  adapterSha256: string;
  /** The served model name: `<runId>/step-NNNNNNNN`, so a reply names the checkpoint that answered. */
  servedName: string;
  /** The trainer config (an attempt's config.json) the checkpoint was trained with. */
  trainerConfigPath: string;
  /** The base model the adapter applies to (the trainer config's `model_path`). */
  baseModel: string;
  /** How the policy was trained to answer and for how many turns (its recipe and `max_turns`). */
  trainedWith: { recipe: string; answerFormat: AnswerFormat; maxTurns: number };
}

/** A checkpoint the run does not have, or a choice that cannot be made (no validation metrics for `best`). */
export class CheckpointChoiceError extends Error {
  override readonly name = 'CheckpointChoiceError';
}

/** `<runId>/step-00000897`. */
export function servedModelName(runId: string, step: number): string {
  return `${runId}/step-${String(step).padStart(8, '0')}`;
}

/** The newest attempt's trainer config of the run (the one the newest checkpoints were trained with). */
export function newestTrainerConfig(runDir: string): string | null {
  for (const segment of listSegments(runDir).reverse()) {
    const dir = segmentDir(runDir, segment);
    if (!existsSync(dir)) continue;
    const attempts = readdirSync(dir)
      .map((name) => /^attempt-(\d+)\.config\.json$/.exec(name))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => Number(m[1]))
      .sort((a, b) => b - a);
    if (attempts.length > 0) return attemptFiles(dir, attempts[0]!).config;
  }
  return null;
}

/**
 * The checkpoint `choice` names among the run's complete local checkpoints. `best` needs the validation
 * metrics (`bestStep`, the step with the highest validation metric); without them it is refused by name.
 */
export async function resolveServedCheckpoint(
  run: { runId: string; runDir: string },
  choice: CheckpointChoice,
  bestStep: number | null = null,
): Promise<ServedCheckpoint> {
  const found = completeCheckpoints(run.runDir);
  const where = `run ${run.runId} (${path.join(run.runDir, RUN_ARTIFACTS.trainingCheckpoints)})`;
  if (found.length === 0) throw new CheckpointChoiceError(`${where} has no complete checkpoint: train it first`);
  let step: number;
  if (choice === 'latest') step = found.at(-1)!.step;
  else if (choice === 'best') {
    if (bestStep === null)
      throw new CheckpointChoiceError(
        `checkpoint: best needs validation metrics, and ${where} has none: set training.validation, or choose latest or a step`,
      );
    step = bestStep;
  } else step = choice;
  const checkpoint = found.find((c) => c.step === step);
  if (!checkpoint)
    throw new CheckpointChoiceError(`${where} has no complete checkpoint at step ${step} (it has ${found.map((c) => c.step).join(', ')})`);
  const weights = checkpointWeightsFile(checkpoint.path);
  if (!weights)
    throw new CheckpointChoiceError(
      `${checkpoint.path} holds neither ${[ADAPTER_WEIGHTS, ...FULL_WEIGHTS].join(' nor ')}: not a checkpoint`,
    );
  const trainerConfigPath = newestTrainerConfig(run.runDir);
  if (!trainerConfigPath)
    throw new CheckpointChoiceError(`${where}: no trainer config (training/segments/*/attempt-*.config.json) to serve it with`);
  const trainerConfig = JSON.parse(readFileSync(trainerConfigPath, 'utf8')) as {
    model_path?: unknown;
    recipe?: unknown;
    max_turns?: unknown;
  };
  if (typeof trainerConfig.model_path !== 'string') throw new CheckpointChoiceError(`${trainerConfigPath}: no model_path`);
  const recipeName = typeof trainerConfig.recipe === 'string' ? trainerConfig.recipe : 'codegrep-v3';
  const preset = RECIPE_PRESETS.recipes[recipeName as TrainerRecipeName];
  if (!preset) throw new CheckpointChoiceError(`${trainerConfigPath}: unknown recipe ${JSON.stringify(recipeName)}`);
  const trainedWith = {
    recipe: recipeName,
    answerFormat: preset.answer_format.value,
    maxTurns: typeof trainerConfig.max_turns === 'number' ? trainerConfig.max_turns : preset.max_turns.value,
  };
  return {
    runId: run.runId,
    step,
    baseModel: trainerConfig.model_path,
    trainedWith,
    dir: checkpoint.path,
    adapterSha256: await sha256File(weights),
    servedName: servedModelName(run.runId, step),
    trainerConfigPath,
  };
}

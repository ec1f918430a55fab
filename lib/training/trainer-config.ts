import { resolveAgentLimits } from '../agent';
import { paperSetupMaxTurns, recipePreset, trainerRecipeName } from '../recipes';
import type { ResolvedTrainingConfig } from '../../schemas/training/config';

/** trainer/config.py spells Dr.GRPO `dr_grpo`. */
const TRAINER_ALGORITHM = { grpo: 'grpo', gspo: 'gspo', drgrpo: 'dr_grpo' } as const;

/**
 * The trainer's JSON config (trainer/config.py) for one segment. `recipe` names the preset
 * (lib/recipes/presets.json) the trainer resolves; keys the training section leaves out are not written, so
 * the preset's values (each with its paper section) and the trainer's other defaults apply. The turn limit is
 * always written, the same number the environment gets (environmentLimits), so the trainer's turn guard and the
 * environment's limit agree.
 * `total_steps` is the run's budget, not the segment's end: it shapes the lr schedule (a segment is stopped
 * by the activity, at a checkpoint).
 */
export function trainerConfig(
  training: ResolvedTrainingConfig,
  run: { outputDir: string; envUrl: string; instanceIds: readonly string[]; totalSteps: number },
): Record<string, unknown> {
  const limits = environmentLimits(training);
  const optional: Record<string, unknown> = {
    batch_size: training.batchSize,
    group_size: training.groupSize,
    max_new_tokens: training.limits.maxNewTokens,
    max_new_tokens_per_turn: training.limits.maxNewTokensPerTurn,
    max_seq_len: training.limits.maxSeqLen,
    lr: training.lr,
    warmup_ratio: training.warmupRatio,
    temperature: training.temperature,
    top_p: training.topP,
    top_k: training.topK,
    kl_beta: training.klBeta,
    algorithm: training.algorithm === undefined ? undefined : TRAINER_ALGORITHM[training.algorithm],
    mask_unanswered_at_turn_limit: training.maskUnansweredAtTurnLimit,
    lora: training.lora,
    checkpoint_every: training.checkpointEvery,
    keep_checkpoints: training.keepCheckpoints,
    mode: training.mode,
    max_staleness: training.maxStaleness,
    paper_setup: training.paperSetup,
    finetune: training.finetune,
  };
  return {
    ...training.trainer,
    model_path: training.modelDir,
    output_dir: run.outputDir,
    env_url: run.envUrl,
    data: { instance_ids: [...run.instanceIds] },
    total_steps: run.totalSteps,
    seed: training.seed,
    recipe: trainerRecipeName(training.recipe),
    max_turns: limits.maxTurns,
    ...Object.fromEntries(Object.entries(optional).filter(([, value]) => value !== undefined)),
  };
}

/** The environment's limits for the same run: the turn limit is the section's, else the paper setup's, else the recipe's. */
export function environmentLimits(training: ResolvedTrainingConfig) {
  const setupTurns = training.paperSetup === undefined ? undefined : paperSetupMaxTurns(training.paperSetup);
  return resolveAgentLimits({
    maxTurns: training.limits.maxTurns ?? setupTurns ?? recipePreset(training.recipe).maxTurns,
    ...(training.limits.maxToolCallsPerTurn === undefined ? {} : { maxToolCallsPerTurn: training.limits.maxToolCallsPerTurn }),
  });
}

/**
 * The trainer's command line for one segment: `python -m trainer.train` for one GPU, torchrun (PyTorch's own
 * launcher, `python -m torch.distributed.run`) with one process per GPU when the section asks for more.
 * `--standalone` runs the rendezvous on this node; a rank that dies ends every rank and torchrun exits non-zero.
 */
export function trainerArgs(training: Pick<ResolvedTrainingConfig, 'gpus'>, configPath: string): string[] {
  const trainer = ['-m', 'trainer.train', '--config', configPath, '--resume', 'latest'];
  if (training.gpus <= 1) return trainer;
  return ['-m', 'torch.distributed.run', '--standalone', '--nproc-per-node', String(training.gpus), ...trainer];
}

import { z } from 'zod';
import { AnswerFormatSchema, type AnswerFormat } from '../../schemas/agent';
import type { PaperSetup, TrainingAlgorithm, TrainingRecipe } from '../../schemas/training/config';
import presetsJson from './presets.json';

/**
 * The training recipes (CodeGrep v1/v2/v3, CodeScout) live in ONE file, `presets.json` next to this module,
 * every value with the paper section it comes from. Both sides read that file: the trainer
 * (trainer/recipes.py) resolves the whole effective recipe (preset, then the recipe's algorithm's loss shape,
 * then explicit config keys) and prints it in its first JSON line and `recipe.json`; this module gives the
 * TypeScript side the values the environment and the workflow need (answer format, masking, turn limit, the
 * algorithm to display). Why a JSON file and not "TypeScript resolves, Python receives": the trainer also runs
 * on its own (bench/gpu-train.sh, its tests, a hand-written config) and must get the same recipe there.
 */

const entry = <T extends z.ZodTypeAny>(value: T) => z.object({ value, source: z.string().min(1) }).strict();
const TrainerAlgorithmName = z.enum(['grpo', 'gspo', 'dr_grpo']);

const RecipePresetSchema = z
  .object({
    reward: entry(z.string()),
    advantage_scale: entry(z.string()),
    answer_format: entry(AnswerFormatSchema),
    algorithm: entry(TrainerAlgorithmName),
    kl_beta: entry(z.number().min(0)),
    lr: entry(z.number().positive()),
    lr_schedule: entry(z.enum(['cosine', 'constant'])),
    warmup_ratio: entry(z.number().min(0).lt(1)),
    temperature: entry(z.number().positive()),
    top_p: entry(z.number().gt(0).max(1)),
    top_k: entry(z.number().int().min(0)),
    max_turns: entry(z.number().int().min(1)),
    max_new_tokens: entry(z.number().int().min(1)),
    mask_unanswered_at_turn_limit: entry(z.boolean()),
    track_kl: entry(z.boolean()),
  })
  .strict();

/**
 * A rejection-sampling fine-tuning warm start (CodeScout §4.1): how trajectories are sampled and kept (read by the
 * RFT stage), the SFT values (read by trainer/recipes.py for `python -m trainer.sft`), and the RL that follows.
 */
const RftPresetSchema = z
  .object({
    teacher: entry(z.string()),
    sampled_instances: entry(z.number().int().positive()),
    keep_min_f1: entry(z.object({ file: z.number(), module: z.number(), function: z.number() }).strict()),
    kept_examples: entry(z.number().int().positive()),
    epochs: entry(z.number().int().positive()),
    lr: entry(z.number().positive()),
    lr_schedule: entry(z.enum(['cosine', 'constant'])),
    warmup_ratio: entry(z.number().min(0).lt(1)),
    global_batch_size: entry(z.number().int().positive()),
    optimizer: entry(z.literal('adamw')),
    rl_steps: entry(z.number().int().positive()),
    rl_instances: entry(z.number().int().positive()),
  })
  .strict();

const PresetsSchema = z.object({
  $comment: z.string(),
  /** The papers' per-model-size training setups (trainer config `paper_setup`); read by trainer/recipes.py. */
  setups: z.record(z.string(), z.union([z.string(), z.record(z.string(), entry(z.unknown()))])),
  algorithms: z.record(
    TrainerAlgorithmName,
    z.object({ clip_low: entry(z.number()), clip_high: entry(z.number()), normalize_advantage_std: entry(z.boolean()) }).strict(),
  ),
  rft: z.object({ $comment: z.string(), codescout: RftPresetSchema }).strict(),
  recipes: z
    .object({
      'codegrep-v1': RecipePresetSchema,
      'codegrep-v2': RecipePresetSchema,
      'codegrep-v3': RecipePresetSchema,
      codescout: RecipePresetSchema,
    })
    .strict(),
});

export const RECIPE_PRESETS = PresetsSchema.parse(presetsJson);
export type TrainerRecipeName = keyof typeof RECIPE_PRESETS.recipes;
export type RecipePreset = z.infer<typeof RecipePresetSchema>;
export type RftPreset = z.infer<typeof RftPresetSchema>;

/** The RFT warm-start preset (CodeScout §4.1), e.g. its keep filter `keep_min_f1` and the SFT values. */
export function rftPreset(name: keyof typeof RECIPE_PRESETS.rft & string = 'codescout'): RftPreset {
  const preset = RECIPE_PRESETS.rft[name];
  if (typeof preset === 'string') throw new Error(`rft preset ${name}: not a preset`);
  return preset;
}

/** The trainer's (and the papers') name of a training recipe: `v3` is `codegrep-v3`. */
export function trainerRecipeName(recipe: TrainingRecipe): TrainerRecipeName {
  return recipe === 'codescout' ? 'codescout' : `codegrep-${recipe}`;
}

/** trainer/config.py spells Dr.GRPO `dr_grpo`; the run config `drgrpo`. */
const TS_ALGORITHM = { grpo: 'grpo', gspo: 'gspo', dr_grpo: 'drgrpo' } as const satisfies Record<
  z.infer<typeof TrainerAlgorithmName>,
  TrainingAlgorithm
>;

export interface RecipeSummary {
  answerFormat: AnswerFormat;
  maskUnansweredAtTurnLimit: boolean;
  maxTurns: number;
  algorithm: TrainingAlgorithm;
}

/** What the TypeScript side needs of a recipe's preset. */
export function recipePreset(recipe: TrainingRecipe): RecipeSummary {
  const preset = RECIPE_PRESETS.recipes[trainerRecipeName(recipe)];
  return {
    answerFormat: preset.answer_format.value,
    maskUnansweredAtTurnLimit: preset.mask_unanswered_at_turn_limit.value,
    maxTurns: preset.max_turns.value,
    algorithm: TS_ALGORITHM[preset.algorithm.value],
  };
}

/** The algorithm a training section runs: its own `algorithm`, else the recipe's. */
export function effectiveAlgorithm(training: { recipe: TrainingRecipe; algorithm?: TrainingAlgorithm | undefined }): TrainingAlgorithm {
  return training.algorithm ?? recipePreset(training.recipe).algorithm;
}

/** The turn limit a paper setup sets (lib/recipes/presets.json `setups`), if it sets one. */
export function paperSetupMaxTurns(setup: PaperSetup): number | undefined {
  const entry = RECIPE_PRESETS.setups[setup];
  if (entry === undefined || typeof entry === 'string') throw new Error(`paperSetup ${setup}: not in lib/recipes/presets.json setups`);
  const maxTurns = entry.max_turns?.value;
  return typeof maxTurns === 'number' ? maxTurns : undefined;
}

import type { AnswerFormat } from '../../schemas/agent';
import type { TrainingRecipe } from '../../schemas/training/config';
import { recipePreset } from '../recipes';

export interface RecipeDefinition {
  recipe: TrainingRecipe;
  /** How the policy answers: CodeGrep's `<answer>` block, or CodeScout's `localization_finish` call. */
  answerFormat: AnswerFormat;
  /**
   * Whether rollouts that use every turn without answering get no loss. CodeScout §3.4: "mask loss for
   * rollouts that exhaust maximum steps without calling the finish tool". CodeGrep §3.6 / App. A.4 masks
   * nothing of the kind.
   */
  maskUnansweredAtTurnLimit: boolean;
}

/**
 * What each training recipe means for the environment: v1/v2/v3 are CodeGrep's reward iterations (§3.5,
 * Table 1) with grep/glob/read and an `<answer>` block; `codescout` is CodeScout's F1 reward (§3.3) with
 * the terminal tool and `localization_finish`. The rewards themselves live in lib/rewards.
 */
export function recipeDefinition(recipe: TrainingRecipe): RecipeDefinition {
  if (!['v1', 'v2', 'v3', 'codescout'].includes(recipe)) {
    throw new RangeError(`unknown training recipe ${JSON.stringify(recipe)} (expected v1, v2, v3 or codescout)`);
  }
  // The values come from the one preset file, lib/recipes/presets.json (each with its paper section).
  const { answerFormat, maskUnansweredAtTurnLimit } = recipePreset(recipe);
  return { recipe, answerFormat, maskUnansweredAtTurnLimit };
}

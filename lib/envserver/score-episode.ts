import type { AgentAnswer, EndReason } from '../../schemas/agent';
import type { TrainingRecipe } from '../../schemas/training/config';
import { locationsToSets } from '../metrics/levels';
import { advantageScale, codeGrepReward, codeScoutReward, toolCallsPerTurn } from '../rewards';
import type { RewardTargets } from './env-samples';

/** What a rollout did, as scoring needs it: an episode result, or the state of one closed before it ended. */
export interface EpisodeActivity {
  turns: number;
  /** Tool calls executed (lib/agent's `toolCalls`). */
  toolCalls: number;
  answer: AgentAnswer | null;
  answerValid: boolean;
  /** `localization_finish` calls (CodeScout). */
  finishCalls: number;
  /** Null for an episode closed before it ended. */
  endReason: EndReason | null;
}

export interface ScoreOptions {
  recipe: TrainingRecipe;
  /** The episode's turn limit: `hitTurnLimit`, and k of CodeScout's turn bonus. */
  maxTurns: number;
  /** CodeScout's +1 for ending in exactly maxTurns turns (CodeScout §3.3, used for CodeScout-14B). */
  codescoutTurnBonus?: boolean;
}

/** The `/episodes/close` result of one episode (trainer/ENV_PROTOCOL.md), without its id. */
export interface EpisodeScore {
  reward: number;
  components: Record<string, number>;
  toolCallsPerTurn: number;
  advantageScale: number;
  turns: number;
  answered: boolean;
  hitTurnLimit: boolean;
}

function componentNames(recipe: TrainingRecipe): string[] {
  switch (recipe) {
    case 'v1':
      return ['file_fbeta', 'file_precision', 'file_recall', 'line_fbeta', 'reward_scale'];
    case 'v2':
      return ['file_fbeta', 'file_precision', 'file_recall', 'line_fbeta', 'tool_mask'];
    case 'v3':
      return ['file_fbeta', 'file_precision', 'file_recall', 'tool_mask'];
    case 'codescout':
      return ['file_f1', 'module_f1', 'function_f1', 'turn_bonus', 'finished_once'];
  }
}

/**
 * Scores a rollout with its recipe's reward from lib/rewards: CodeGrep v1/v2/v3 (§3.5) against G(x), the
 * patch files and the gold hunk ranges, or CodeScout's F1 sum (§3.3) against the patch's files, classes and
 * functions. A missing or invalid answer predicts nothing. For CodeScout a `localization_finish` call whose
 * arguments fail the schema does not count as finishing, so it cannot collect the turn bonus. A rollout closed
 * before its first turn did nothing: reward 0, c̄ = 0. Every component of the recipe is always present, so
 * the trainer's per-step means average over every rollout.
 */
export function scoreEpisode(activity: EpisodeActivity, targets: RewardTargets, options: ScoreOptions): EpisodeScore {
  const answered = activity.endReason === 'answer' || activity.endReason === 'invalid_answer';
  const common = { turns: activity.turns, answered, hitTurnLimit: activity.turns >= options.maxTurns };
  const components = Object.fromEntries(componentNames(options.recipe).map((name) => [name, 0]));
  if (activity.turns === 0) {
    const scale = options.recipe === 'v2' || options.recipe === 'v3' ? advantageScale(0) : 1;
    return { reward: 0, components, toolCallsPerTurn: 0, advantageScale: scale, ...common };
  }
  const rollout = { toolCalls: activity.toolCalls, turns: activity.turns };
  const answer = activity.answerValid ? activity.answer : null;

  if (options.recipe === 'codescout') {
    const locations = answer && 'locations' in answer ? answer.locations : [];
    const reward = codeScoutReward({
      ...rollout,
      predicted: locationsToSets(locations),
      gold: { files: targets.patchFiles, modules: targets.modules, functions: targets.functions },
      finishCalls: answer === null ? 0 : activity.finishCalls,
      ...(options.codescoutTurnBonus ? { turnLimit: options.maxTurns } : {}),
    });
    components.file_f1 = reward.components.levels.file.f1;
    components.module_f1 = reward.components.levels.module.f1;
    components.function_f1 = reward.components.levels.function.f1;
    components.turn_bonus = reward.components.turnBonus;
    components.finished_once = reward.components.finishedOnce;
    return {
      reward: reward.total,
      components,
      toolCallsPerTurn: reward.toolCallsPerTurn,
      advantageScale: reward.advantageScale,
      ...common,
    };
  }

  const files = answer && 'files' in answer ? answer.files : [];
  const lineRanges = answer && 'lineRanges' in answer ? answer.lineRanges : [];
  const reward = codeGrepReward(options.recipe, {
    ...rollout,
    predictedFiles: files,
    predictedLineRanges: lineRanges,
    targetFiles: targets.targetFiles,
    patchFiles: targets.patchFiles,
    goldLineRanges: targets.goldLineRanges,
  });
  components.file_fbeta = reward.components.file.f;
  components.file_precision = reward.components.file.precision;
  components.file_recall = reward.components.file.recall;
  if ('line_fbeta' in components) components.line_fbeta = reward.components.lineRange?.f ?? 0;
  if ('tool_mask' in components) components.tool_mask = reward.components.mask;
  if ('reward_scale' in components) components.reward_scale = reward.components.rewardScale;
  return {
    reward: reward.total,
    components,
    toolCallsPerTurn: toolCallsPerTurn(rollout),
    advantageScale: reward.advantageScale,
    ...common,
  };
}

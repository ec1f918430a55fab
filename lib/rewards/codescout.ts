import { levelScores, type Level, type LevelScores, type LocalizationSets } from '../metrics/levels';
import { CODESCOUT_LEVEL_WEIGHTS, CODESCOUT_TURN_BONUS } from './params';
import { toolCallsPerTurn, type RolloutActivity } from './tool-efficiency';

export interface CodeScoutRewardInput extends RolloutActivity {
  /** Sets named by the `localization_finish` call (see `locationsToSets`). */
  predicted: LocalizationSets;
  gold: LocalizationSets;
  /** How many times the rollout called `localization_finish`. */
  finishCalls: number;
  /** When set, +1 iff the episode ends in exactly `turnLimit` turns (CodeScout-14B's auxiliary reward). */
  turnLimit?: number;
}

export interface CodeScoutReward {
  total: number;
  components: {
    levels: Record<Level, LevelScores>;
    /** F1(file) + F1(module) + F1(function), before the finish-call gate. */
    f1Sum: number;
    /** 0 or 1; 0 when no turn limit is configured. */
    turnBonus: number;
    /** 1 iff `localization_finish` was called exactly once; everything else earns 0. */
    finishedOnce: 0 | 1;
  };
  toolCallsPerTurn: number;
  /** CodeScout does not scale advantages: always 1. */
  advantageScale: number;
}

/**
 * CodeScout's reward (§3.3, Eq. 1): r = F1(file) + F1(module) + F1(function), plus the optional binary turn
 * reward (+1 iff the agent terminates in exactly k turns, k the step limit). The whole reward is 0 unless the
 * finish tool was called exactly once: without a single structured answer there is nothing to score.
 * A level with an empty ground-truth set contributes 0 (CodeScout's reward rule); a non-empty gold set with an
 * empty prediction scores 0 too.
 */
export function codeScoutReward(input: CodeScoutRewardInput): CodeScoutReward {
  const cBar = toolCallsPerTurn(input);
  if (!Number.isInteger(input.finishCalls) || input.finishCalls < 0) {
    throw new RangeError(`finishCalls must be a non-negative integer, got ${input.finishCalls}`);
  }
  if (input.turnLimit !== undefined && (!Number.isInteger(input.turnLimit) || input.turnLimit < 1)) {
    throw new RangeError(`turnLimit must be a positive integer, got ${input.turnLimit}`);
  }
  const levels = levelScores(input.predicted, input.gold);
  // CodeScout's reward F1 of a level whose ground-truth set is empty is 0, whatever was predicted (a patch that
  // touches no class earns nothing at the module level), unlike App. B's evaluation convention (1 when both
  // sets are empty), which `levels` keeps for the metrics.
  const rewardF1 = (level: Level) => (levels[level].tp + levels[level].fn === 0 ? 0 : levels[level].f1);
  const f1Sum =
    CODESCOUT_LEVEL_WEIGHTS.file * rewardF1('file') +
    CODESCOUT_LEVEL_WEIGHTS.module * rewardF1('module') +
    CODESCOUT_LEVEL_WEIGHTS.function * rewardF1('function');
  const turnBonus = input.turnLimit !== undefined && input.turns === input.turnLimit ? CODESCOUT_TURN_BONUS : 0;
  const finishedOnce: 0 | 1 = input.finishCalls === 1 ? 1 : 0;
  return {
    total: finishedOnce * (f1Sum + turnBonus),
    components: { levels, f1Sum, turnBonus, finishedOnce },
    toolCallsPerTurn: cBar,
    advantageScale: 1,
  };
}

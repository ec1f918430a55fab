import { fileScores } from '../metrics/levels';
import { catmOnlyFiles, lineRangeScores, type LineRange, type LineRangeScores } from '../metrics/line-ranges';
import type { SetScores } from '../metrics/set-scores';
import { F_BETA } from './params';
import { advantageScale, rewardScaleV1, toolCallsPerTurn, usedToolsMask, type RolloutActivity } from './tool-efficiency';

export type CodeGrepRewardVersion = 'v1' | 'v2' | 'v3';

export interface CodeGrepRewardInput extends RolloutActivity {
  /** P(x): files in the rollout's answer. */
  predictedFiles: readonly string[];
  /** Pr: line ranges in the answer (ignored by v3). */
  predictedLineRanges?: readonly LineRange[];
  /** G(x) = Gpatch(x) ∪ surviving CATM files (CodeGrep §3.4). */
  targetFiles: readonly string[];
  /** Gpatch(x): gold-patch files, to tell CATM-only files apart (App. B, merge mode). */
  patchFiles: readonly string[];
  /** Gr: pre-image hunk ranges of the gold patch (patch files only, App. B). */
  goldLineRanges?: readonly LineRange[];
}

export interface CodeGrepReward {
  version: CodeGrepRewardVersion;
  total: number;
  components: {
    file: SetScores;
    /** Absent for v3, which has no line-range term. */
    lineRange?: LineRangeScores;
    /** ½(Ffile + Flr) for v1/v2, Ffile for v3. */
    base: number;
    /** σv1(c̄) for v1; 1 for v2/v3 (no reward-layer scale). */
    rewardScale: number;
    /** 1[c̄ > 0] for v2/v3; 1 for v1 (no mask). */
    mask: 0 | 1;
  };
  /** c̄ = tool calls / turns. */
  toolCallsPerTurn: number;
  /** Multiplier of this rollout's GRPO advantage: s(c̄) for v2/v3, 1 for v1. */
  advantageScale: number;
}

/**
 * CodeGrep's three reward iterations (§3.5, Table 1; App. B):
 *   v1: R = ½(Fβfile + Fβlr) · 1/max(1, c̄/4)                 advantage × 1
 *   v2: R = ½(Fβfile + Fβlr) · 1[c̄ > 0]                      advantage × s(c̄)
 *   v3: R = Fβfile · 1[c̄ > 0]                                 advantage × s(c̄)
 * Fβfile compares predicted files with the target set G(x); Fβlr compares predicted ranges with the gold
 * patch ranges, after dropping predicted ranges on CATM-only files.
 */
export function codeGrepReward(version: CodeGrepRewardVersion, input: CodeGrepRewardInput): CodeGrepReward {
  const cBar = toolCallsPerTurn(input);
  const file = fileScores(input.predictedFiles, input.targetFiles, F_BETA);
  if (version === 'v3') {
    const mask = usedToolsMask(cBar);
    return {
      version,
      total: file.f * mask,
      components: { file, base: file.f, rewardScale: 1, mask },
      toolCallsPerTurn: cBar,
      advantageScale: advantageScale(cBar),
    };
  }
  const lineRange = lineRangeScores(input.predictedLineRanges ?? [], input.goldLineRanges ?? [], {
    beta: F_BETA,
    catmOnlyFiles: catmOnlyFiles(input.targetFiles, input.patchFiles),
  });
  const base = (file.f + lineRange.f) / 2;
  if (version === 'v1') {
    const rewardScale = rewardScaleV1(cBar);
    return {
      version,
      total: base * rewardScale,
      components: { file, lineRange, base, rewardScale, mask: 1 },
      toolCallsPerTurn: cBar,
      advantageScale: 1,
    };
  }
  if (version !== 'v2') throw new RangeError(`unknown CodeGrep reward version ${JSON.stringify(version)} (expected v1, v2 or v3)`);
  const mask = usedToolsMask(cBar);
  return {
    version,
    total: base * mask,
    components: { file, lineRange, base, rewardScale: 1, mask },
    toolCallsPerTurn: cBar,
    advantageScale: advantageScale(cBar),
  };
}

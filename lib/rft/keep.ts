import type { AgentAnswer } from '../../schemas/agent';
import type { RftConfig } from '../../schemas/rft';
import { levelScores, locationsToSets, type Level } from '../metrics/levels';
import { rftPreset } from '../recipes';

/**
 * Which sampled rollouts RFT keeps (CodeScout §4.1: "retain only those achieving perfect localization across all
 * three granularities (i.e., F1 = 1.0 for file, module, and function)"). The threshold lives once, in
 * lib/recipes/presets.json's `rft` section (also read by trainer.sft); the run config's `rft.keep` may override a level.
 */

export type KeepThresholds = Record<Level, number>;

/** The preset's per-level minimum F1 (lib/recipes/presets.json `rft.codescout.keep_min_f1`, CodeScout §4.1). */
export function presetKeepThresholds(): KeepThresholds {
  return rftPreset('codescout').keep_min_f1.value;
}

export function keepThresholds(keep: RftConfig['keep']): KeepThresholds {
  const preset = presetKeepThresholds();
  return { file: keep.file ?? preset.file, module: keep.module ?? preset.module, function: keep.function ?? preset.function };
}

export interface LevelF1 {
  file: number;
  /** Null: the answer format names no modules or functions (CodeGrep's `<answer>` lists files only). */
  module: number | null;
  function: number | null;
}

/**
 * Per-level F1 of a rollout's answer against the gold patch's files, modules and functions (the sets CodeScout's
 * reward scores, §3.3). A rollout without a valid answer predicted nothing. CodeGrep's answer names files only,
 * so its module and function F1 are null (not zero: the format cannot say them).
 */
export function answerLevelF1(
  answer: AgentAnswer | null,
  answerFormat: 'codegrep' | 'codescout',
  gold: { files: readonly string[]; modules: readonly string[]; functions: readonly string[] },
): LevelF1 {
  const predicted =
    answer && 'locations' in answer
      ? locationsToSets(answer.locations)
      : { files: answer && 'files' in answer ? answer.files : [], modules: [], functions: [] };
  const scores = levelScores(predicted, gold);
  if (answerFormat === 'codegrep') return { file: scores.file.f1, module: null, function: null };
  return { file: scores.file.f1, module: scores.module.f1, function: scores.function.f1 };
}

/** Kept when every level the answer format scores reaches its threshold. A failed rollout is never kept. */
export function isKept(f1: LevelF1, thresholds: KeepThresholds, failed: boolean): boolean {
  if (failed) return false;
  return (['file', 'module', 'function'] as const).every((level) => {
    const value = f1[level];
    return value === null || value >= thresholds[level];
  });
}

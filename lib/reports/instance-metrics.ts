import type { EvaluationPrediction, FileTarget, InstanceMetrics } from '../../schemas/evaluation';
import { levelScores, type LevelScores } from '../metrics/levels';
import { catmOnlyFiles, lineRangeScores, type LineRange } from '../metrics/line-ranges';
import { accuracyAtK } from '../metrics/ranked';
import { dedupePaths } from '../paths/normalize';
import { ACCURACY_AT_K } from './params';

/** What one instance is scored against: the environment stage's ground truth plus the CATM target set. */
export interface InstanceTruth {
  /** Files the gold patch changes (`gold_files`). */
  goldFiles: readonly string[];
  /** G(x) = gold files ∪ retained CATM files (`targetFiles`, CodeGrep §3.4). */
  targetFiles: readonly string[];
  /** Whole-hunk pre-image ranges of the gold patch (`gold_line_ranges`, CodeGrep App. B's Gr). */
  lineRanges: readonly LineRange[];
  /** `file.py:Class` (`gold_modules`). */
  modules: readonly string[];
  /** `file.py:Class.method` / `file.py:func` (`gold_functions`). */
  functions: readonly string[];
}

/** The file set an instance's file-level scores compare against (see schemas/evaluation.ts FileTarget). */
export function fileTargetOf(truth: InstanceTruth, fileTarget: FileTarget): readonly string[] {
  return fileTarget === 'gold-patch' ? truth.goldFiles : truth.targetFiles;
}

/**
 * One instance's scores (CodeGrep §4.2 and App. B; CodeScout §4.2; Acc@k as in CodeScout App. G):
 * file-level precision, recall, Fβ(0.5) and F1 against the file target; line-range Fβ against the gold hunks
 * when the retriever gives line ranges (predicted ranges on CATM-only files dropped under `catm-merge`,
 * App. B); module and function precision, recall and F1 when it predicts those levels; Acc@1/3/5 over its
 * ranked list when it ranks. A failed prediction carries empty lists and is scored as predicting nothing.
 */
export function scoreInstance(prediction: EvaluationPrediction, truth: InstanceTruth, fileTarget: FileTarget): InstanceMetrics {
  const target = fileTargetOf(truth, fileTarget);
  const levels = levelScores(
    { files: prediction.files, modules: prediction.modules ?? [], functions: prediction.functions ?? [] },
    { files: target, modules: truth.modules, functions: truth.functions },
  );
  const level = (scores: LevelScores, predicted: boolean) =>
    predicted ? { precision: scores.precision, recall: scores.recall, f1: scores.f1 } : { precision: null, recall: null, f1: null };
  const module = level(levels.module, prediction.modules !== null);
  const fn = level(levels.function, prediction.functions !== null);

  let lineRangeFBeta: number | null = null;
  if (prediction.lineRanges !== null) {
    const dropped = fileTarget === 'catm-merge' ? catmOnlyFiles(truth.targetFiles, truth.goldFiles) : [];
    lineRangeFBeta = lineRangeScores(prediction.lineRanges, truth.lineRanges, { catmOnlyFiles: dropped }).f;
  }

  const accuracy = new Map<number, number | null>();
  const ranked = prediction.ranked === null ? null : dedupePaths(prediction.ranked);
  const gold = dedupePaths(target);
  for (const k of ACCURACY_AT_K) accuracy.set(k, ranked === null ? null : accuracyAtK(ranked, gold, k).accuracy);

  return {
    instanceId: prediction.instanceId,
    retriever: prediction.retriever,
    kind: prediction.kind,
    goldFiles: gold.length,
    predictedFiles: dedupePaths(prediction.files).length,
    filePrecision: levels.file.precision,
    fileRecall: levels.file.recall,
    fileFBeta: levels.file.fBeta,
    fileF1: levels.file.f1,
    lineRangeFBeta,
    modulePrecision: module.precision,
    moduleRecall: module.recall,
    moduleF1: module.f1,
    functionPrecision: fn.precision,
    functionRecall: fn.recall,
    functionF1: fn.f1,
    accAt1: accuracy.get(1) ?? null,
    accAt3: accuracy.get(3) ?? null,
    accAt5: accuracy.get(5) ?? null,
    turns: prediction.turns,
    toolCalls: prediction.toolCalls,
    failed: prediction.error !== null,
  };
}

import { dedupeEntityIds, dedupePaths } from '../paths/normalize';
import { F_BETA } from './params';
import { scoresFromCounts, setScores, type SetScores } from './set-scores';

/**
 * The three localisation granularities of CodeScout §3.1/§4.2: files, modules (classes, `file.py:Class`) and
 * functions (`file.py:Class.method` or `file.py:func`).
 */
export interface LocalizationSets {
  files: readonly string[];
  modules: readonly string[];
  functions: readonly string[];
}

export type Level = 'file' | 'module' | 'function';
export const LEVELS: readonly Level[] = ['file', 'module', 'function'];

/** Per-level counts with both the precision-biased Fβ (CodeGrep §4.2) and F1 (CodeScout §4.2). */
export interface LevelScores {
  tp: number;
  fp: number;
  fn: number;
  precision: number;
  recall: number;
  fBeta: number;
  beta: number;
  f1: number;
}

/** File-level set scores after path normalisation (App. E "Scoring": separators normalised first). */
export function fileScores(predicted: Iterable<string>, gold: Iterable<string>, beta: number = F_BETA): SetScores {
  return setScores(dedupePaths(predicted), dedupePaths(gold), beta);
}

/** Entity-level (module or function) set scores after entity-id normalisation of the file part. */
export function entityScores(predicted: Iterable<string>, gold: Iterable<string>, beta: number = F_BETA): SetScores {
  return setScores(dedupeEntityIds(predicted), dedupeEntityIds(gold), beta);
}

function withF1(scores: SetScores, predictedSize: number, goldSize: number): LevelScores {
  const f1 = scoresFromCounts(scores.tp, predictedSize, goldSize, 1).f;
  const { tp, fp, fn, precision, recall, f, beta } = scores;
  return { tp, fp, fn, precision, recall, fBeta: f, beta, f1 };
}

function levelScore(predicted: string[], gold: string[], beta: number): LevelScores {
  const scores = setScores(predicted, gold, beta);
  return withF1(scores, scores.tp + scores.fp, scores.tp + scores.fn);
}

/** Precision, recall, Fβ and F1 at file, module and function level for one instance. */
export function levelScores(predicted: LocalizationSets, gold: LocalizationSets, beta: number = F_BETA): Record<Level, LevelScores> {
  return {
    file: levelScore(dedupePaths(predicted.files), dedupePaths(gold.files), beta),
    module: levelScore(dedupeEntityIds(predicted.modules), dedupeEntityIds(gold.modules), beta),
    function: levelScore(dedupeEntityIds(predicted.functions), dedupeEntityIds(gold.functions), beta),
  };
}

/** One location of CodeScout's `localization_finish` call (App. A, Table 7). */
export interface FinishLocation {
  file: string;
  class_name?: string | null;
  function_name?: string | null;
}

/**
 * The three sets named by a list of `localization_finish` locations, built as CodeScout's released reward
 * code builds them: every location adds its file; a class adds the module `file:Class`; a function adds
 * `file:Class.func` when a class is given and `file:func` otherwise. A top-level function is therefore not a
 * module (CodeScout's ground truth keeps only classes as modules). Locations with an empty file are ignored.
 */
export function locationsToSets(locations: readonly FinishLocation[]): LocalizationSets {
  const files: string[] = [];
  const modules: string[] = [];
  const functions: string[] = [];
  for (const location of locations) {
    const file = location.file.trim();
    if (file === '') continue;
    files.push(file);
    const className = (location.class_name ?? '').trim();
    const functionName = (location.function_name ?? '').trim();
    if (className !== '') modules.push(`${file}:${className}`);
    if (functionName !== '') functions.push(className !== '' ? `${file}:${className}.${functionName}` : `${file}:${functionName}`);
  }
  return { files: dedupePaths(files), modules: dedupeEntityIds(modules), functions: dedupeEntityIds(functions) };
}

/**
 * Modules implied by function entities, for predictions that list entities but no modules: the class part
 * of every `file:Class.method` (a `file:func` names no class, so no module). Order of first appearance.
 */
export function modulesFromEntities(entities: Iterable<string>): string[] {
  const modules: string[] = [];
  for (const id of dedupeEntityIds(entities)) {
    const colon = id.lastIndexOf(':');
    if (colon < 0) continue;
    const symbol = id.slice(colon + 1);
    const dot = symbol.lastIndexOf('.');
    if (dot <= 0) continue;
    modules.push(`${id.slice(0, colon)}:${symbol.slice(0, dot)}`);
  }
  return dedupeEntityIds(modules);
}

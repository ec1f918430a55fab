import type {
  Estimate,
  EvaluationPrediction,
  InstanceMetrics,
  LevelSummary,
  RetrieverKind,
  RetrieverSummary,
} from '../../schemas/evaluation';
import { HIGH_QUALITY_F_THRESHOLD } from '../metrics/params';
import { bootstrapCI, mean, median } from '../metrics/summary';
import { ACCURACY_AT_K } from './params';

/** A shard row: one instance's prediction by one retriever and its scores. */
export type ScoredInstance = InstanceMetrics & Pick<EvaluationPrediction, 'promptTokens' | 'completionTokens' | 'answerValid'>;

export interface BootstrapSettings {
  samples: number;
  seed: number;
  confidence: number;
}

/** `value` of the statistic with its percentile bootstrap interval (lib/metrics `bootstrapCI`); nulls when empty. */
export function estimate(
  values: readonly number[],
  bootstrap: BootstrapSettings,
  statistic: (v: readonly number[]) => number = mean,
): Estimate {
  if (values.length === 0) return { value: null, ci: null };
  const ci = bootstrapCI(values, { resamples: bootstrap.samples, seed: bootstrap.seed, confidence: bootstrap.confidence, statistic });
  return { value: ci.estimate, ci: { low: ci.low, high: ci.high } };
}

function present(values: readonly (number | null)[]): number[] {
  return values.filter((v): v is number => v !== null);
}

function meanOrNull(values: readonly (number | null)[]): number | null {
  const kept = present(values);
  return kept.length === 0 ? null : mean(kept);
}

function levelSummary(
  rows: readonly ScoredInstance[],
  columns: { f1: keyof ScoredInstance; precision: keyof ScoredInstance; recall: keyof ScoredInstance },
  bootstrap: BootstrapSettings,
): LevelSummary | null {
  const column = (name: keyof ScoredInstance) => present(rows.map((r) => r[name] as number | null));
  const f1 = column(columns.f1);
  if (f1.length === 0) return null;
  return {
    f1: estimate(f1, bootstrap),
    precision: estimate(column(columns.precision), bootstrap),
    recall: estimate(column(columns.recall), bootstrap),
  };
}

/**
 * One retriever's row of each report table:
 *  - CodeGrep Table 2 (§4.2): mean and median file Fβ(0.5), mean precision and recall, the share of instances
 *    with Fβ ≥ 0.8, mean turns (agentic retrievers only);
 *  - CodeScout Table 3 (§4.2): instance-wise mean F1, precision and recall at file, module and function level
 *    (a level the retriever does not predict is null, shown as "–" like the paper's baselines);
 *  - Acc@1/3/5 over ranked file lists (CodeScout App. G), null for retrievers that do not rank.
 * Every mean, the median and the share carry a seeded percentile bootstrap interval. Failed instances are
 * included, scored as empty predictions, and counted in `failed`.
 */
export function summarizeRetriever(
  name: string,
  kind: RetrieverKind,
  rows: readonly ScoredInstance[],
  bootstrap: BootstrapSettings,
): RetrieverSummary {
  const fBeta = rows.map((r) => r.fileFBeta);
  const highQuality = fBeta.map((f) => (f >= HIGH_QUALITY_F_THRESHOLD ? 1 : 0));
  const lineRanges = present(rows.map((r) => r.lineRangeFBeta));
  const accuracyColumns = { 1: 'accAt1', 3: 'accAt3', 5: 'accAt5' } as const satisfies Record<
    (typeof ACCURACY_AT_K)[number],
    keyof ScoredInstance
  >;
  const ranked = rows.some((r) => r.accAt1 !== null);
  const agentic = kind === 'agent';
  return {
    name,
    kind,
    instances: rows.length,
    failed: rows.filter((r) => r.failed).length,
    table2: {
      fBetaMean: estimate(fBeta, bootstrap),
      fBetaMedian: estimate(fBeta, bootstrap, median),
      precision: estimate(
        rows.map((r) => r.filePrecision),
        bootstrap,
      ),
      recall: estimate(
        rows.map((r) => r.fileRecall),
        bootstrap,
      ),
      shareHighQuality: estimate(highQuality, bootstrap),
      turns: agentic ? meanOrNull(rows.map((r) => r.turns)) : null,
    },
    lineRangeFBeta: lineRanges.length === 0 ? null : estimate(lineRanges, bootstrap),
    table3: {
      file: levelSummary(rows, { f1: 'fileF1', precision: 'filePrecision', recall: 'fileRecall' }, bootstrap) ?? {
        f1: { value: null, ci: null },
        precision: { value: null, ci: null },
        recall: { value: null, ci: null },
      },
      module: levelSummary(rows, { f1: 'moduleF1', precision: 'modulePrecision', recall: 'moduleRecall' }, bootstrap),
      function: levelSummary(rows, { f1: 'functionF1', precision: 'functionPrecision', recall: 'functionRecall' }, bootstrap),
    },
    accuracyAtK: ranked
      ? ACCURACY_AT_K.map((k) => ({ k, value: estimate(present(rows.map((r) => r[accuracyColumns[k]])), bootstrap) }))
      : null,
    agent: agentic
      ? {
          toolCalls: meanOrNull(rows.map((r) => r.toolCalls)),
          promptTokens: meanOrNull(rows.map((r) => r.promptTokens)),
          completionTokens: meanOrNull(rows.map((r) => r.completionTokens)),
          invalidAnswers: rows.filter((r) => r.answerValid === false).length,
        }
      : null,
  };
}

import type { EvaluationSummary, LevelSummary, RetrieverSummary } from '../../schemas/evaluation';
import { NOT_APPLICABLE, decimal1, decimal3, interval, percent1, points2 } from './format';
import { ACCURACY_AT_K } from './params';

/** A report table as plain text cells; markdown.ts and html.ts render the same tables. */
export interface ReportTable {
  id: string;
  title: string;
  /** One sentence under the title: what the numbers are and where the layout comes from. */
  caption: string;
  headers: string[];
  /** Per column: numbers right-aligned, names left-aligned. */
  align: ('left' | 'right')[];
  rows: string[][];
}

const numeric = (columns: number): ('left' | 'right')[] => ['left', ...Array<'right'>(columns).fill('right')];

function table2(summary: EvaluationSummary): ReportTable {
  return {
    id: 'table2',
    title: 'Retrieval quality (CodeGrep Table 2 layout)',
    caption: `File-level Fβ (β = ${summary.beta}), precision and recall, instance means; "Fβ ≥ ${summary.highQualityThreshold}" is the share of instances at or above it. Turns apply to agentic retrievers only.`,
    headers: ['Retriever', 'Fβ mean', 'Fβ median', 'Precision', 'Recall', `Fβ ≥ ${summary.highQualityThreshold}`, 'Turns'],
    align: numeric(6),
    rows: summary.retrievers.map((r) => [
      r.name,
      decimal3(r.table2.fBetaMean.value),
      decimal3(r.table2.fBetaMedian.value),
      decimal3(r.table2.precision.value),
      decimal3(r.table2.recall.value),
      percent1(r.table2.shareHighQuality.value),
      decimal1(r.table2.turns),
    ]),
  };
}

function table2Intervals(summary: EvaluationSummary): ReportTable {
  const { confidence, samples, seed } = summary.bootstrap;
  const d3 = (v: number) => v.toFixed(3);
  const p1 = (v: number) => `${(v * 100).toFixed(1)}%`;
  return {
    id: 'table2-intervals',
    title: `${Math.round(confidence * 100)}% bootstrap intervals`,
    caption: `Percentile bootstrap over instances: ${samples} resamples, seed ${seed}.`,
    headers: ['Retriever', 'Fβ mean', 'Fβ median', 'Precision', 'Recall', `Fβ ≥ ${summary.highQualityThreshold}`],
    align: numeric(5),
    rows: summary.retrievers.map((r) => [
      r.name,
      interval(r.table2.fBetaMean, d3),
      interval(r.table2.fBetaMedian, d3),
      interval(r.table2.precision, d3),
      interval(r.table2.recall, d3),
      interval(r.table2.shareHighQuality, p1),
    ]),
  };
}

function levelCells(level: LevelSummary | null): string[] {
  if (!level) return [NOT_APPLICABLE, NOT_APPLICABLE, NOT_APPLICABLE];
  return [points2(level.f1.value), points2(level.precision.value), points2(level.recall.value)];
}

function table3(summary: EvaluationSummary): ReportTable {
  return {
    id: 'table3',
    title: 'Localization at three levels (CodeScout Table 3 layout)',
    caption:
      'Instance-wise mean F1, precision and recall (%) of files, modules (classes) and functions; "–": the retriever does not predict that level.',
    headers: [
      'Retriever',
      'File F1',
      'File Prec.',
      'File Rec.',
      'Module F1',
      'Module Prec.',
      'Module Rec.',
      'Function F1',
      'Function Prec.',
      'Function Rec.',
    ],
    align: numeric(9),
    rows: summary.retrievers.map((r) => [
      r.name,
      ...levelCells(r.table3.file),
      ...levelCells(r.table3.module),
      ...levelCells(r.table3.function),
    ]),
  };
}

function table3Intervals(summary: EvaluationSummary): ReportTable {
  const p2 = (v: number) => (v * 100).toFixed(2);
  const f1 = (level: LevelSummary | null) => (level ? interval(level.f1, p2) : NOT_APPLICABLE);
  return {
    id: 'table3-intervals',
    title: `F1 ${Math.round(summary.bootstrap.confidence * 100)}% bootstrap intervals`,
    caption: 'Same resampling as above, in percentage points.',
    headers: ['Retriever', 'File F1', 'Module F1', 'Function F1'],
    align: numeric(3),
    rows: summary.retrievers.map((r) => [r.name, f1(r.table3.file), f1(r.table3.module), f1(r.table3.function)]),
  };
}

function accuracyTable(summary: EvaluationSummary): ReportTable | null {
  const ranked = summary.retrievers.filter((r) => r.accuracyAtK !== null);
  if (ranked.length === 0) return null;
  return {
    id: 'accuracy-at-k',
    title: 'Ranked file lists: Acc@k',
    caption:
      'Share of instances whose target files are all among the first k ranked files (retrievers that rank; CodeScout App. G compares K = 1, 3, 5).',
    headers: ['Retriever', ...ACCURACY_AT_K.map((k) => `Acc@${k}`)],
    align: numeric(ACCURACY_AT_K.length),
    rows: ranked.map((r) => [r.name, ...ACCURACY_AT_K.map((k) => percent1(r.accuracyAtK!.find((a) => a.k === k)?.value.value ?? null))]),
  };
}

function lineRangeTable(summary: EvaluationSummary): ReportTable | null {
  const withRanges = summary.retrievers.filter((r) => r.lineRangeFBeta !== null);
  if (withRanges.length === 0) return null;
  const d3 = (v: number) => v.toFixed(3);
  return {
    id: 'line-ranges',
    title: 'Line-range Fβ (CodeGrep App. B)',
    caption: 'Greedy one-to-one matching of predicted and gold-hunk ranges (same file, ≥ 50% of the gold range covered).',
    headers: ['Retriever', 'Line-range Fβ mean', 'Interval'],
    align: numeric(2),
    rows: withRanges.map((r) => [r.name, decimal3(r.lineRangeFBeta!.value), interval(r.lineRangeFBeta, d3)]),
  };
}

function runsTable(summary: EvaluationSummary): ReportTable {
  const count = (value: number | null) => (value === null ? NOT_APPLICABLE : value.toFixed(1));
  return {
    id: 'retrievers',
    title: 'Retrievers',
    caption: 'Failed instances (endpoint errors, missing worktrees, no line in a predictions file) are scored as empty predictions.',
    headers: ['Retriever', 'Kind', 'Instances', 'Failed', 'Tool calls', 'Prompt tokens', 'Completion tokens', 'Invalid answers'],
    align: ['left', 'left', 'right', 'right', 'right', 'right', 'right', 'right'],
    rows: summary.retrievers.map((r: RetrieverSummary) => [
      r.name,
      r.kind,
      String(r.instances),
      String(r.failed),
      r.agent ? count(r.agent.toolCalls) : NOT_APPLICABLE,
      r.agent ? count(r.agent.promptTokens) : NOT_APPLICABLE,
      r.agent ? count(r.agent.completionTokens) : NOT_APPLICABLE,
      r.agent ? String(r.agent.invalidAnswers) : NOT_APPLICABLE,
    ]),
  };
}

/** The report's tables, in reading order. */
export function reportTables(summary: EvaluationSummary): ReportTable[] {
  return [
    table2(summary),
    table2Intervals(summary),
    table3(summary),
    table3Intervals(summary),
    accuracyTable(summary),
    lineRangeTable(summary),
    runsTable(summary),
  ].filter((t): t is ReportTable => t !== null);
}

/** The sentence under the report's title: what was evaluated against what. */
export function scopeSentence(summary: EvaluationSummary): string {
  const target =
    summary.fileTarget === 'gold-patch' ? 'the gold-patch files' : 'the CATM target set G(x) = gold-patch files ∪ retained CATM files';
  const excluded = summary.excluded;
  return (
    `${summary.instances} instances, file-level scores against ${target}. ` +
    `Left out: ${excluded.withoutGroundTruth} without ground truth, ${excluded.notSelected} not selected.`
  );
}

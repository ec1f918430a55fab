import { describe, expect, it } from 'vitest';
import type { EvaluationSummary } from '../../schemas/evaluation';
import { renderHtmlReport } from './html';
import { renderMarkdownReport } from './markdown';
import { summarizeRetriever, type ScoredInstance } from './retriever-summary';
import { histogramCounts, precisionRecallScatterSvg } from './svg-charts';

const bootstrap = { samples: 200, seed: 3, confidence: 0.95 };

function row(overrides: Partial<ScoredInstance>): ScoredInstance {
  return {
    instanceId: 'i',
    retriever: 'r',
    kind: 'bm25',
    goldFiles: 1,
    predictedFiles: 2,
    filePrecision: 0.5,
    fileRecall: 1,
    fileFBeta: 5 / 9,
    fileF1: 2 / 3,
    lineRangeFBeta: null,
    modulePrecision: null,
    moduleRecall: null,
    moduleF1: null,
    functionPrecision: null,
    functionRecall: null,
    functionF1: null,
    accAt1: 1,
    accAt3: 1,
    accAt5: 1,
    turns: null,
    toolCalls: null,
    failed: false,
    promptTokens: null,
    completionTokens: null,
    answerValid: null,
    ...overrides,
  };
}

const bm25Rows = [
  row({ instanceId: 'a' }),
  row({ instanceId: 'b', filePrecision: 0, fileRecall: 0, fileFBeta: 0, fileF1: 0, accAt1: 0, accAt3: 0, accAt5: 1 }),
];
const scoutRows = [
  row({
    instanceId: 'a',
    kind: 'agent',
    filePrecision: 1,
    fileRecall: 1,
    fileFBeta: 1,
    fileF1: 1,
    moduleF1: 1,
    modulePrecision: 1,
    moduleRecall: 1,
    functionF1: 0.5,
    functionPrecision: 0.5,
    functionRecall: 0.5,
    accAt1: null,
    accAt3: null,
    accAt5: null,
    turns: 2,
  }),
  row({
    instanceId: 'b',
    kind: 'agent',
    filePrecision: 1,
    fileRecall: 1,
    fileFBeta: 1,
    fileF1: 1,
    moduleF1: 1,
    modulePrecision: 1,
    moduleRecall: 1,
    functionF1: 1,
    functionPrecision: 1,
    functionRecall: 1,
    accAt1: null,
    accAt3: null,
    accAt5: null,
    turns: 1,
  }),
];

const summary: EvaluationSummary = {
  runId: 'nightly-1',
  instances: 2,
  excluded: { withoutGroundTruth: 1, notSelected: 0 },
  fileTarget: 'gold-patch',
  beta: 0.5,
  highQualityThreshold: 0.8,
  bootstrap,
  retrievers: [summarizeRetriever('bm25', 'bm25', bm25Rows, bootstrap), summarizeRetriever('scout', 'agent', scoutRows, bootstrap)],
  failedRetrievers: [{ name: 'dense', reason: 'dense: model dir required | <none>' }],
  servedPolicies: [
    {
      retriever: 'scout',
      runId: 'nightly-1',
      step: 897,
      adapterSha256: 'ab'.repeat(32),
      baseModel: '/models/Qwen3-4B',
      model: 'nightly-1/step-00000897',
      backend: 'vllm',
      answerFormat: 'codescout',
      maxTurns: 4,
    },
  ],
};
const artifacts = { predictions: 'predictions.parquet', metrics: 'metrics.parquet', summary: 'summary.json' };

describe('Markdown report', () => {
  const md = renderMarkdownReport(summary, artifacts);

  it('has the CodeGrep Table 2 rows in the paper’s format', () => {
    expect(md).toContain('| Retriever | Fβ mean | Fβ median | Precision | Recall | Fβ ≥ 0.8 | Turns |');
    // bm25: Fβ mean (5/9 + 0)/2 = 0.278, median 0.278, P 0.250, R 0.500, share 0.0%, no turns.
    expect(md).toContain('| bm25 | 0.278 | 0.278 | 0.250 | 0.500 | 0.0% | – |');
    expect(md).toContain('| scout | 1.000 | 1.000 | 1.000 | 1.000 | 100.0% | 1.5 |');
  });

  it('has the CodeScout Table 3 rows in percent, "–" for levels not predicted, and Acc@k for ranked retrievers only', () => {
    expect(md).toContain('| bm25 | 33.33 | 25.00 | 50.00 | – | – | – | – | – | – |');
    expect(md).toContain('| scout | 100.00 | 100.00 | 100.00 | 100.00 | 100.00 | 100.00 | 75.00 | 75.00 | 75.00 |');
    expect(md).toContain('| bm25 | 50.0% | 50.0% | 100.0% |');
    expect(md).not.toMatch(/\| scout \| [0-9.]+% \|/);
  });

  it('states the scope, lists retrievers that did not finish (escaped) and names the artifacts', () => {
    expect(md).toContain('2 instances, file-level scores against the gold-patch files. Left out: 1 without ground truth, 0 not selected.');
    expect(md).toContain('- **dense**: dense: model dir required \\| <none>');
    expect(md).toContain('`predictions.parquet`');
    expect(md).toContain(
      `- **scout**: run \`nightly-1\` step 897 (served as \`nightly-1/step-00000897\`, vllm), base model \`/models/Qwen3-4B\`, adapter sha256 \`${'ab'.repeat(32)}\`, codescout answers, 4 turns`,
    );
    expect(md).toMatch(/## 95% bootstrap intervals[\s\S]*\| bm25 \| \[0\.000, 0\.556\] \|/);
  });
});

describe('HTML report', () => {
  const html = renderHtmlReport(summary, artifacts, [
    {
      name: 'bm25',
      fBeta: bm25Rows.map((r) => r.fileFBeta),
      points: bm25Rows.map((r) => ({ precision: r.filePrecision, recall: r.fileRecall, label: r.instanceId })),
    },
    {
      name: 'scout',
      fBeta: scoutRows.map((r) => r.fileFBeta),
      points: scoutRows.map((r) => ({ precision: r.filePrecision, recall: r.fileRecall, label: r.instanceId })),
    },
  ]);

  it('is self-contained: inline style and SVG, no script, no external resource', () => {
    expect(html.startsWith('<!DOCTYPE html>')).toBe(true);
    expect(html).toContain('<style>');
    expect(html).not.toMatch(/<script|<link|src=|@import/i);
    const urls = html.match(/https?:\/\/[^\s"'<>]+/g) ?? [];
    expect(new Set(urls)).toEqual(new Set(['http://www.w3.org/2000/svg']));
  });

  it('has the same table rows, a histogram and a scatter per retriever, and escapes text', () => {
    expect(html).toContain('<td class="left">bm25</td><td class="right">0.278</td><td class="right">0.278</td>');
    expect(html.match(/<svg /g)).toHaveLength(4);
    expect(html.match(/class="bar"/g)).toHaveLength(20);
    expect(html).toContain('<title>Fβ 0.5–0.6: 1</title>');
    expect(html).toContain('dense: model dir required | &lt;none&gt;');
    // scout's two instances share (1, 1): one circle listing both.
    expect(html).toContain('<title>P 1.000, R 1.000: a, b</title>');
  });
});

describe('charts', () => {
  it('bins values over [0, 1] with 1.0 in the last bin and rejects values outside', () => {
    expect(histogramCounts([0, 0.05, 0.1, 0.55, 0.99, 1], 10)).toEqual([2, 1, 0, 0, 0, 1, 0, 0, 0, 2]);
    expect(() => histogramCounts([1.2])).toThrow(/value #0 is 1.2/);
  });

  it('scales a scatter circle with the number of instances at the same point', () => {
    const one = precisionRecallScatterSvg([{ precision: 0, recall: 0, label: 'x' }], 't');
    const five = precisionRecallScatterSvg(
      Array.from({ length: 5 }, (_, i) => ({ precision: 0, recall: 0, label: `x${i}` })),
      't',
    );
    expect(one).toContain('r="3"');
    expect(five).toContain('r="7"');
    expect(() => precisionRecallScatterSvg([{ precision: Number.NaN, recall: 0, label: 'x' }], 't')).toThrow(/precision is NaN/);
  });
});

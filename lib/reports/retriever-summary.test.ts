import { describe, expect, it } from 'vitest';
import { summarizeRetriever, type ScoredInstance } from './retriever-summary';

const bootstrap = { samples: 500, seed: 11, confidence: 0.95 };

function row(overrides: Partial<ScoredInstance>): ScoredInstance {
  return {
    instanceId: 'i',
    retriever: 'r',
    kind: 'agent',
    goldFiles: 1,
    predictedFiles: 1,
    filePrecision: 0,
    fileRecall: 0,
    fileFBeta: 0,
    fileF1: 0,
    lineRangeFBeta: null,
    modulePrecision: null,
    moduleRecall: null,
    moduleF1: null,
    functionPrecision: null,
    functionRecall: null,
    functionF1: null,
    accAt1: null,
    accAt3: null,
    accAt5: null,
    turns: null,
    toolCalls: null,
    failed: false,
    promptTokens: null,
    completionTokens: null,
    answerValid: null,
    ...overrides,
  };
}

describe('summarizeRetriever (CodeGrep Table 2, CodeScout Table 3)', () => {
  const agentRows = [
    row({
      instanceId: 'a',
      fileFBeta: 1,
      fileF1: 1,
      filePrecision: 1,
      fileRecall: 1,
      turns: 2,
      toolCalls: 4,
      promptTokens: 100,
      completionTokens: 10,
      answerValid: true,
      lineRangeFBeta: 0.5,
    }),
    row({
      instanceId: 'b',
      fileFBeta: 0.8,
      fileF1: 0.8,
      filePrecision: 0.8,
      fileRecall: 0.8,
      turns: 3,
      toolCalls: 6,
      promptTokens: 300,
      completionTokens: 30,
      answerValid: true,
      lineRangeFBeta: 0,
    }),
    row({
      instanceId: 'c',
      fileFBeta: 0.2,
      fileF1: 0.25,
      filePrecision: 0.5,
      fileRecall: 0.1,
      turns: 4,
      toolCalls: 8,
      promptTokens: 500,
      completionTokens: 50,
      answerValid: false,
      lineRangeFBeta: 1,
    }),
    row({ instanceId: 'd', failed: true, turns: null, toolCalls: null, answerValid: null, lineRangeFBeta: 0 }),
  ];

  it('gives the Table 2 columns: Fβ mean and median, precision, recall, share with Fβ ≥ 0.8 (inclusive), mean turns', () => {
    const s = summarizeRetriever('v3', 'agent', agentRows, bootstrap);
    expect(s).toMatchObject({ name: 'v3', kind: 'agent', instances: 4, failed: 1 });
    expect(s.table2.fBetaMean.value).toBeCloseTo((1 + 0.8 + 0.2 + 0) / 4, 15);
    expect(s.table2.fBetaMedian.value).toBeCloseTo((0.8 + 0.2) / 2, 15);
    expect(s.table2.precision.value).toBeCloseTo((1 + 0.8 + 0.5) / 4, 15);
    expect(s.table2.recall.value).toBeCloseTo((1 + 0.8 + 0.1) / 4, 15);
    expect(s.table2.shareHighQuality.value).toBe(0.5); // 1 and exactly 0.8
    expect(s.table2.turns).toBe(3); // failed instance has no turns
    expect(s.lineRangeFBeta!.value).toBeCloseTo(1.5 / 4, 15);
    expect(s.agent).toEqual({ toolCalls: 6, promptTokens: 300, completionTokens: 30, invalidAnswers: 1 });
    expect(s.accuracyAtK).toBeNull();
    expect(s.table3.module).toBeNull();
    expect(s.table3.function).toBeNull();
    expect(s.table3.file.f1.value).toBeCloseTo((1 + 0.8 + 0.25) / 4, 15);
  });

  it('attaches seeded bootstrap intervals that bracket the estimate and are reproducible', () => {
    const a = summarizeRetriever('v3', 'agent', agentRows, bootstrap);
    const b = summarizeRetriever('v3', 'agent', agentRows, bootstrap);
    expect(a).toEqual(b);
    for (const e of [a.table2.fBetaMean, a.table2.precision, a.table2.recall, a.table2.shareHighQuality, a.table3.file.f1]) {
      expect(e.ci!.low).toBeLessThanOrEqual(e.value!);
      expect(e.ci!.high).toBeGreaterThanOrEqual(e.value!);
      expect(e.ci!.high).toBeGreaterThan(e.ci!.low);
    }
    const other = summarizeRetriever('v3', 'agent', agentRows, { ...bootstrap, seed: 12 });
    expect(other.table2.fBetaMean.ci).not.toEqual(a.table2.fBetaMean.ci);
  });

  it('reports Acc@k for ranked retrievers and the levels a retriever predicts; no turns for non-agentic retrievers', () => {
    const ranked = [
      row({
        kind: 'predictions',
        accAt1: 1,
        accAt3: 1,
        accAt5: 1,
        moduleF1: 1,
        modulePrecision: 1,
        moduleRecall: 1,
        functionF1: 0.5,
        functionPrecision: 0.5,
        functionRecall: 0.5,
        turns: null,
      }),
      row({
        kind: 'predictions',
        accAt1: 0,
        accAt3: 1,
        accAt5: 1,
        moduleF1: 0,
        modulePrecision: 0,
        moduleRecall: 0,
        functionF1: 1,
        functionPrecision: 1,
        functionRecall: 1,
      }),
    ];
    const s = summarizeRetriever('locagent', 'predictions', ranked, bootstrap);
    expect(s.accuracyAtK!.map((a) => [a.k, a.value.value])).toEqual([
      [1, 0.5],
      [3, 1],
      [5, 1],
    ]);
    expect(s.table3.module!.f1.value).toBe(0.5);
    expect(s.table3.function!.f1.value).toBe(0.75);
    expect(s.table2.turns).toBeNull();
    expect(s.agent).toBeNull();
    expect(s.lineRangeFBeta).toBeNull();
  });

  it('has null estimates and no intervals for a retriever without instances', () => {
    const s = summarizeRetriever('empty', 'bm25', [], bootstrap);
    expect(s.instances).toBe(0);
    expect(s.table2.fBetaMean).toEqual({ value: null, ci: null });
    expect(s.table3.file.f1).toEqual({ value: null, ci: null });
  });
});

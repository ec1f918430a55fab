import { describe, expect, it } from 'vitest';
import type { EvaluationPrediction } from '../../schemas/evaluation';
import { scoreInstance, type InstanceTruth } from './instance-metrics';

const truth: InstanceTruth = {
  goldFiles: ['pkg/a.py', 'pkg/b.py'],
  targetFiles: ['pkg/a.py', 'pkg/b.py', 'pkg/catm.py'],
  lineRanges: [
    { path: 'pkg/a.py', start: 10, end: 19 },
    { path: 'pkg/b.py', start: 1, end: 4 },
  ],
  modules: ['pkg/a.py:A'],
  functions: ['pkg/a.py:A.run', 'pkg/b.py:helper'],
};

function prediction(overrides: Partial<EvaluationPrediction>): EvaluationPrediction {
  return {
    instanceId: 'x-1',
    retriever: 'r',
    kind: 'bm25',
    files: [],
    ranked: null,
    lineRanges: null,
    modules: null,
    functions: null,
    turns: null,
    toolCalls: null,
    promptTokens: null,
    completionTokens: null,
    answerValid: null,
    endReason: null,
    error: null,
    ms: 0,
    servedModel: null,
    baseModel: null,
    checkpointStep: null,
    adapterSha256: null,
    ...overrides,
  };
}

describe('scoreInstance', () => {
  it('scores a ranked top-2 list: file P/R/Fβ/F1 and Acc@1/3/5, levels it does not predict left null', () => {
    const m = scoreInstance(
      prediction({ files: ['pkg/a.py', 'pkg/z.py'], ranked: ['pkg/a.py', 'pkg/z.py', 'pkg/b.py', 'pkg/c.py', 'pkg/d.py'] }),
      truth,
      'gold-patch',
    );
    // P = 1/2, R = 1/2: Fβ = F1 = 1/2.
    expect(m).toMatchObject({
      goldFiles: 2,
      predictedFiles: 2,
      filePrecision: 0.5,
      fileRecall: 0.5,
      fileFBeta: 0.5,
      fileF1: 0.5,
      failed: false,
    });
    // Both gold files first appear together at rank 3.
    expect([m.accAt1, m.accAt3, m.accAt5]).toEqual([0, 1, 1]);
    expect([m.lineRangeFBeta, m.moduleF1, m.functionF1, m.turns]).toEqual([null, null, null, null]);
  });

  it('scores CodeGrep answers with line ranges; under catm-merge the target is G(x) and CATM-only ranges are dropped', () => {
    const answer = prediction({
      kind: 'agent',
      files: ['pkg/a.py', 'pkg/catm.py'],
      lineRanges: [
        { path: 'pkg/a.py', start: 12, end: 30 }, // covers 10..19 by 8/10: a match
        { path: 'pkg/catm.py', start: 1, end: 9 }, // CATM-only file: dropped under catm-merge
      ],
      turns: 3,
      toolCalls: 7,
    });
    const gold = scoreInstance(answer, truth, 'gold-patch');
    // Files vs gold {a, b}: P 1/2, R 1/2. Ranges: 1 match of 2 predicted, 2 gold: P = R = 1/2.
    expect(gold).toMatchObject({ filePrecision: 0.5, fileRecall: 0.5, lineRangeFBeta: 0.5, turns: 3, toolCalls: 7, accAt1: null });
    const merged = scoreInstance(answer, truth, 'catm-merge');
    // Files vs G = {a, b, catm}: P 1, R 2/3 → Fβ = 1.25·(2/3)/(0.25 + 2/3) = 10/11, F1 = 4/5.
    expect(merged.filePrecision).toBe(1);
    expect(merged.fileRecall).toBeCloseTo(2 / 3, 15);
    expect(merged.fileFBeta).toBeCloseTo(10 / 11, 15);
    expect(merged.fileF1).toBeCloseTo(4 / 5, 15);
    // The CATM-only range is dropped: 1 scored range, 1 match, 2 gold → P 1, R 1/2 → Fβ = 5/6.
    expect(merged.lineRangeFBeta).toBeCloseTo(5 / 6, 15);
  });

  it('scores CodeScout locations at module and function level', () => {
    const m = scoreInstance(
      prediction({ kind: 'agent', files: ['pkg/a.py'], modules: ['pkg/a.py:A', 'pkg/a.py:B'], functions: ['pkg/a.py:A.run'] }),
      truth,
      'gold-patch',
    );
    expect(m).toMatchObject({
      filePrecision: 1,
      fileRecall: 0.5,
      modulePrecision: 0.5,
      moduleRecall: 1,
      functionPrecision: 1,
      functionRecall: 0.5,
    });
    expect(m.fileF1).toBeCloseTo(2 / 3, 15);
    expect(m.moduleF1).toBeCloseTo(2 / 3, 15);
    expect(m.functionF1).toBeCloseTo(2 / 3, 15);
  });

  it('scores a failed prediction as predicting nothing, and an empty level against an empty gold level as 1', () => {
    const failed = scoreInstance(prediction({ ranked: [], error: 'no worktree' }), truth, 'gold-patch');
    expect(failed).toMatchObject({ failed: true, fileFBeta: 0, fileF1: 0, accAt1: 0, accAt5: 0 });
    const noModules: InstanceTruth = { ...truth, modules: [] };
    const m = scoreInstance(prediction({ files: ['pkg/a.py'], modules: [], functions: [] }), noModules, 'gold-patch');
    expect(m.moduleF1).toBe(1);
    expect(m.functionF1).toBe(0);
  });

  it('normalises paths before comparing and counts each file once', () => {
    const m = scoreInstance(
      prediction({ files: ['./pkg/a.py', 'pkg\\a.py', 'pkg//b.py'], ranked: ['./pkg/a.py', 'pkg/b.py'] }),
      truth,
      'gold-patch',
    );
    expect(m).toMatchObject({ predictedFiles: 2, fileFBeta: 1, accAt1: 0, accAt3: 1 });
  });
});

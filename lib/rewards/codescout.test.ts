import { describe, expect, it } from 'vitest';
import { locationsToSets } from '../metrics/levels';
import { parseLocalizationFinish } from '../agent/answer-codescout';
import { codeScoutReward } from './codescout';

const gold = { files: ['a.py'], modules: ['a.py:A', 'a.py:B'], functions: ['a.py:A.f'] };
const perfect = gold;
// file F1 2/3 (P 1/2, R 1), module F1 2/3 (P 1, R 1/2), function F1 2/3 (P 1/2, R 1).
const partial = { files: ['a.py', 'b.py'], modules: ['a.py:A'], functions: ['a.py:A.f', 'a.py:g'] };

describe('CodeScout reward (§3.3, Eq. 1)', () => {
  it('is F1(file) + F1(module) + F1(function)', () => {
    const r = codeScoutReward({ predicted: partial, gold, finishCalls: 1, toolCalls: 6, turns: 3 });
    expect(r.total).toBeCloseTo(2, 15);
    expect(r.components.levels.module.f1).toBeCloseTo(2 / 3, 15);
    expect(r.toolCallsPerTurn).toBe(2);
    expect(r.advantageScale).toBe(1);
    expect(codeScoutReward({ predicted: perfect, gold, finishCalls: 1, toolCalls: 1, turns: 1 }).total).toBe(3);
  });

  it('is 0 unless the finish tool is called exactly once', () => {
    for (const finishCalls of [0, 2, 3]) {
      const r = codeScoutReward({ predicted: perfect, gold, finishCalls, toolCalls: 4, turns: 4, turnLimit: 4 });
      expect(r.total).toBe(0);
      expect(r.components.finishedOnce).toBe(0);
      expect(r.components.f1Sum).toBe(3);
    }
  });

  it('adds +1 only when the episode ends in exactly k turns (when k is configured)', () => {
    expect(codeScoutReward({ predicted: perfect, gold, finishCalls: 1, toolCalls: 4, turns: 4, turnLimit: 4 }).total).toBe(4);
    expect(codeScoutReward({ predicted: perfect, gold, finishCalls: 1, toolCalls: 3, turns: 3, turnLimit: 4 }).total).toBe(3);
    expect(codeScoutReward({ predicted: perfect, gold, finishCalls: 1, toolCalls: 4, turns: 4 }).components.turnBonus).toBe(0);
  });

  it('scores a level whose ground truth is empty as 0, even when nothing was predicted there (CodeScout rule)', () => {
    const onlyFunctions = { files: ['a.py'], modules: [], functions: ['a.py:f'] };
    const predicted = locationsToSets([{ file: 'a.py', function_name: 'f' }]);
    const r = codeScoutReward({ predicted, gold: onlyFunctions, finishCalls: 1, toolCalls: 2, turns: 2 });
    expect(r.total).toBe(2);
    // The evaluation metrics keep App. B's convention (both empty: 1); only the reward differs.
    expect(r.components.levels.module.f1).toBe(1);
    const filesOnly = locationsToSets([{ file: 'a.py' }]);
    expect(codeScoutReward({ predicted: filesOnly, gold: onlyFunctions, finishCalls: 1, toolCalls: 2, turns: 2 }).total).toBe(1);
    const nothing = { files: [], modules: [], functions: [] };
    expect(codeScoutReward({ predicted: nothing, gold: nothing, finishCalls: 1, toolCalls: 1, turns: 1 }).total).toBe(0);
  });

  it('scores predictions that arrive as localization_finish [{file, class_name, function_name}] arguments', () => {
    const raw = JSON.stringify({
      locations: [
        { file: 'a.py', class_name: 'A', function_name: 'f' },
        { file: './b.py', function_name: 'g' },
        { file: 'a.py', class_name: 'B' },
      ],
    });
    const parsed = parseLocalizationFinish(raw, '/repo');
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    const predicted = locationsToSets(parsed.answer.locations);
    expect(predicted).toEqual({ files: ['a.py', 'b.py'], modules: ['a.py:A', 'a.py:B'], functions: ['a.py:A.f', 'b.py:g'] });
    const r = codeScoutReward({ predicted, gold, finishCalls: 1, toolCalls: 3, turns: 3 });
    // file F1 2/3 (P 1/2), module F1 1, function F1 2/3 (P 1/2).
    expect(r.total).toBeCloseTo(2 / 3 + 1 + 2 / 3, 12);
  });

  it('rejects bad counts', () => {
    expect(() => codeScoutReward({ predicted: perfect, gold, finishCalls: -1, toolCalls: 1, turns: 1 })).toThrow(/finishCalls/);
    expect(() => codeScoutReward({ predicted: perfect, gold, finishCalls: 1, toolCalls: 1, turns: 1, turnLimit: 0 })).toThrow(/turnLimit/);
  });
});

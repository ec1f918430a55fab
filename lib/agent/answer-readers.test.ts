import { describe, expect, it } from 'vitest';
import { readCodeGrepReply } from './answer-codegrep';
import { readCodeScoutReply } from './answer-codescout';
import type { PendingCall } from './assistant-turn';
import { EpisodeStats } from './episode-stats';

const ROOT = '/worktrees/astropy__astropy-12907';
const finish = (args: string, malformed?: string): PendingCall => ({
  id: 'c1',
  name: 'localization_finish',
  arguments: args,
  ...(malformed === undefined ? {} : { malformed }),
});
const grep: PendingCall = { id: 'c0', name: 'grep', arguments: '{"pattern": "x"}' };

describe('readCodeGrepReply', () => {
  it('ends on a complete block (valid or not), leaves a reply without one running, and reads a cut block as the budget', () => {
    const reply = (content: string, truncated = false) => readCodeGrepReply({ content, calls: [], truncated }, ROOT);
    expect(reply('<answer>{"files": ["a.py"]}</answer>')).toEqual({
      finishCalls: 0,
      end: { reason: 'answer', parsed: { ok: true, answer: { files: ['a.py'], lineRanges: [] } } },
    });
    expect(reply('<answer>nope</answer>').end?.reason).toBe('invalid_answer');
    expect(reply('just text')).toEqual({ finishCalls: 0 });
    expect(reply('<answer>{"files": [', true)).toEqual({ finishCalls: 0, end: { reason: 'budget' } });
    expect(reply('<answer>{"files": []}')).toEqual({
      finishCalls: 0,
      end: { reason: 'invalid_answer', parsed: { ok: false, error: 'the <answer> block has no closing </answer>' } },
    });
  });
});

describe('readCodeScoutReply', () => {
  const reply = (calls: PendingCall[], truncated = false) => readCodeScoutReply({ content: '', calls, truncated }, ROOT);
  it('answers with exactly one localization_finish call and counts every call', () => {
    expect(reply([grep])).toEqual({ finishCalls: 0 });
    const one = reply([grep, finish('{"locations": [{"file": "a.py"}]}')]);
    expect(one).toEqual({ finishCalls: 1, end: { reason: 'answer', parsed: { ok: true, answer: { locations: [{ file: 'a.py' }] } } } });
    const two = reply([finish('{"locations": []}'), finish('{"locations": []}')]);
    expect(two.finishCalls).toBe(2);
    expect(two.end).toEqual({
      reason: 'invalid_answer',
      parsed: { ok: false, error: 'localization_finish was called 2 times; it must be called exactly once' },
    });
  });

  it('reads an unreadable call as the budget when generation was cut, an invalid answer otherwise', () => {
    expect(reply([finish('{', 'bad block')], true)).toEqual({ finishCalls: 1, end: { reason: 'budget' } });
    expect(reply([finish('{', 'bad block')])).toEqual({
      finishCalls: 1,
      end: { reason: 'invalid_answer', parsed: { ok: false, error: 'bad block' } },
    });
  });
});

describe('EpisodeStats', () => {
  it('counts turns, calls and usage, one entry per turn in toolCallsPerTurn', () => {
    const stats = new EpisodeStats();
    expect(stats.startTurn({ promptTokens: 10, completionTokens: 3 })).toBe(1);
    stats.recordToolTurn(2, 1, 1);
    expect(stats.startTurn()).toBe(2);
    stats.addFinishCalls(1);
    stats.recordFinalTurn();
    expect(stats.counts()).toEqual({
      turns: 2,
      toolCalls: 2,
      toolCallsPerTurn: [2, 0],
      toolCallsDropped: 1,
      toolErrors: 1,
      finishCalls: 1,
      promptTokens: 10,
      completionTokens: 3,
    });
  });

  it('refuses a usage that is not a non-negative integer, naming the field', () => {
    const stats = new EpisodeStats();
    expect(() => stats.startTurn({ promptTokens: 1, completionTokens: -1 })).toThrow(
      'step(): usage.completionTokens must be a non-negative integer, got -1',
    );
    expect(() => stats.startTurn({ promptTokens: 1.5, completionTokens: 1 })).toThrow(/usage\.promptTokens/);
  });
});

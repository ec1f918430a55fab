import { describe, expect, it } from 'vitest';
import type { JudgeCandidate, Judgement } from '../../schemas/judge';
import { createCandidateGate, judgementKey, knownJudgements } from './judge-resume';

const candidate = (trajectoryId: string, path: string): JudgeCandidate => ({
  trajectoryId,
  instanceId: 'django__django-11099',
  repo: 'django/django',
  path,
  problemStatement: 'UsernameValidator allows trailing newline',
  postReasoning: 'The validator regex uses $ which matches before a trailing newline.',
  postReasoningTokens: 40,
});

const judgement = (trajectoryId: string, path: string, extra: Partial<Judgement> = {}): Judgement => ({
  trajectoryId,
  instanceId: 'django__django-11099',
  path,
  verdict: 'RELEVANT',
  reply: 'RELEVANT',
  attempts: 1,
  model: 'judge-model',
  latencyMs: 12,
  ...extra,
});

describe('judgementKey', () => {
  it('keeps (trajectory, path) pairs apart even when their concatenations match', () => {
    expect(judgementKey('t1', 'a/b.py')).not.toBe(judgementKey('t1a', '/b.py'));
    expect(judgementKey('t1', 'a.py')).toBe(judgementKey('t1', 'a.py'));
  });
});

describe('knownJudgements', () => {
  it('reads the shards back by key, skips malformed lines, and a later row for a key wins', () => {
    const known = knownJudgements([
      judgement('t1', 'a.py', { verdict: 'DEFAULTED', reply: '', error: 'HTTP 500 after 3 attempts' }),
      { trajectoryId: 't1' },
      'not a record',
      judgement('t2', 'b.py', { verdict: 'NOT_RELEVANT' }),
      judgement('t1', 'a.py', { verdict: 'NOT_RELEVANT' }),
    ]);
    expect([...known.keys()]).toEqual([judgementKey('t1', 'a.py'), judgementKey('t2', 'b.py')]);
    expect(known.get(judgementKey('t1', 'a.py'))?.verdict).toBe('NOT_RELEVANT');
  });
});

describe('createCandidateGate', () => {
  it('admits a new candidate once, then calls its second copy a duplicate', () => {
    const admit = createCandidateGate(new Set());
    const first = admit(candidate('t1', 'a.py'), 1);
    expect(first.kind).toBe('new');
    if (first.kind === 'new') expect(first.candidate.path).toBe('a.py');
    expect(admit(candidate('t1', 'a.py'), 2)).toEqual({ kind: 'duplicate' });
    expect(admit(candidate('t2', 'a.py'), 3).kind).toBe('new');
  });

  it('passes over candidates an earlier attempt already judged', () => {
    const admit = createCandidateGate(new Set([judgementKey('t1', 'a.py')]));
    expect(admit(candidate('t1', 'a.py'), 1)).toEqual({ kind: 'resumed' });
    expect(admit(candidate('t1', 'b.py'), 2).kind).toBe('new');
  });

  it('names an invalid candidate by its position and the field that is wrong, and does not admit its key', () => {
    const admit = createCandidateGate(new Set());
    const bad = admit({ ...candidate('t1', 'a.py'), postReasoningTokens: 'many' }, 7);
    expect(bad.kind).toBe('invalid');
    if (bad.kind === 'invalid') {
      expect(bad.message).toMatch(/^candidate #7: /);
      expect(bad.message).toContain('postReasoningTokens');
      expect(bad.message).not.toContain('\n');
    }
    expect(admit(candidate('t1', 'a.py'), 8).kind).toBe('new');
  });
});

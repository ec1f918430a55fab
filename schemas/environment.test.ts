import { describe, expect, it } from 'vitest';
import { checkoutsNeeded } from './environment';

describe('checkoutsNeeded (environment.worktrees)', () => {
  const auto = { worktrees: 'auto' as const };
  const bm25AndDense = { retrievers: [{ kind: 'bm25' }, { kind: 'dense' }] };

  it('a run that ends in an evaluation of BM25 and dense only makes no worktree', () => {
    expect(checkoutsNeeded({ stages: ['catm', 'environment', 'evaluation'], environment: auto, evaluation: bm25AndDense })).toBe(false);
  });

  it('training, downstream, an agent retriever, an environment-only run or `always` make them', () => {
    const agent = { retrievers: [{ kind: 'bm25' }, { kind: 'agent' }] };
    expect(checkoutsNeeded({ stages: ['environment', 'evaluation'], environment: auto, evaluation: agent })).toBe(true);
    expect(checkoutsNeeded({ stages: ['environment', 'training', 'evaluation'], environment: auto, evaluation: bm25AndDense })).toBe(true);
    expect(checkoutsNeeded({ stages: ['environment', 'evaluation', 'downstream'], environment: auto, evaluation: bm25AndDense })).toBe(
      true,
    );
    expect(checkoutsNeeded({ stages: ['catm', 'environment'], environment: auto, evaluation: bm25AndDense })).toBe(true);
    expect(checkoutsNeeded({ stages: ['environment', 'evaluation'], environment: { worktrees: 'always' }, evaluation: bm25AndDense })).toBe(
      true,
    );
  });
});

import { describe, expect, it } from 'vitest';
import { bestValidatedStep, patienceExhausted } from './validation-choice';
import { splitSamples } from './validation';

const commit = (c: string) => c.repeat(40);
const sample = (instanceId: string, repo: string, c: string) => ({ instanceId, repo, baseCommit: commit(c) });
const samples = [sample('a-1', 'acme/a', 'a'), sample('a-2', 'acme/a', 'a'), sample('b-1', 'acme/b', 'b'), sample('c-1', 'acme/c', 'c')];

describe('the validation split', () => {
  it('holds out the named instances and trains on the rest', () => {
    const split = splitSamples(samples, ['b-1']);
    expect(split.problems).toEqual([]);
    expect(split.validation.map((s) => s.instanceId)).toEqual(['b-1']);
    expect(split.training.map((s) => s.instanceId)).toEqual(['a-1', 'a-2', 'c-1']);
  });

  it('refuses a held-out instance whose commit a training sample shares, naming both', () => {
    const split = splitSamples(samples, ['a-1']);
    expect(split.problems).toEqual([
      `training.validation.instances share a repository commit with training samples: a-2 (training) and a-1 (held out) are both acme/a@${'a'.repeat(12)}; hold out every instance of a commit, or none`,
    ]);
    expect(splitSamples(samples, ['a-1', 'a-2']).problems).toEqual([]);
  });

  it('refuses unknown instances and a split that leaves nothing to train on', () => {
    expect(splitSamples(samples, ['zz-9']).problems).toEqual(['training.validation.instances: zz-9 are not samples of this run']);
    expect(splitSamples(samples, ['a-1', 'a-2', 'b-1', 'c-1']).problems).toEqual([
      'training.validation.instances holds out every sample: nothing is left to train on',
    ]);
  });
});

describe('choosing a validated checkpoint', () => {
  const rows = [
    { step: 2, value: 0.1 },
    { step: 4, value: 0.4 },
    { step: 6, value: 0.3 },
    { step: 8, value: 0.4 },
    { step: 10, value: null },
  ];
  it('best is the highest metric, the earlier of equals; a missing value never wins', () => {
    expect(bestValidatedStep(rows)).toBe(4);
    expect(bestValidatedStep([{ step: 3, value: null }])).toBeNull();
    expect(bestValidatedStep([])).toBeNull();
  });

  it('patience counts the validations since the best', () => {
    expect(patienceExhausted(rows, 3)).toBe(true); // 6, 8, 10 brought nothing new
    expect(patienceExhausted(rows, 4)).toBe(false);
    expect(patienceExhausted(rows, undefined)).toBe(false);
    expect(patienceExhausted(rows.slice(0, 2), 1)).toBe(false); // 4 is the newest best
  });
});

describe('the training.validation config', () => {
  const parse = async (training: Record<string, unknown>) => {
    const { TrainingConfigSchema } = await import('../../schemas/training/config');
    const result = TrainingConfigSchema.safeParse({ modelDir: '/m', steps: 10, ...training });
    return result.success ? [] : result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  };

  it('takes held-out instances, an interval, a metric and patience', async () => {
    expect(await parse({ checkpointEvery: 5, validation: { instances: ['a-1'], every: 10, metric: 'fileF1', patience: 2 } })).toEqual([]);
  });

  it('needs every validated step to have a checkpoint, and each instance once', async () => {
    expect(await parse({ checkpointEvery: 4, validation: { instances: ['a-1'], every: 10 } })).toEqual([
      'validation.every: must be a multiple of checkpointEvery (4), so every validated step has a checkpoint',
    ]);
    expect(await parse({ validation: { instances: ['a-1'], every: 5 } })).toEqual([
      'validation.every: must be a multiple of checkpointEvery (10, the trainer default), so every validated step has a checkpoint',
    ]);
    expect(await parse({ validation: { instances: ['a-1', 'a-1'], every: 10 } })).toEqual([
      'validation.instances.1: instance "a-1" is listed twice',
    ]);
    expect(await parse({ validation: { instances: ['a-1'], every: 10, metric: 'recall' } })).toEqual([
      'validation.metric: Invalid option: expected one of "fBetaMean"|"fileF1"|"moduleF1"|"functionF1"',
    ]);
  });
});

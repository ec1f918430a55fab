import { describe, expect, it } from 'vitest';
import { EvaluationConfigSchema } from './evaluation/config';

const parse = (retriever: Record<string, unknown>) => EvaluationConfigSchema.safeParse({ retrievers: [retriever] });
const messages = (retriever: Record<string, unknown>) => {
  const result = parse(retriever);
  return result.success ? [] : result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
};

describe('the agent retriever with a trained policy', () => {
  it('takes policy: trained with a checkpoint, and needs no endpoint, model or answer format', () => {
    expect(messages({ name: 'trained', kind: 'agent', policy: 'trained', checkpoint: 'best' })).toEqual([]);
    expect(messages({ name: 'trained', kind: 'agent', policy: 'trained', checkpoint: 897 })).toEqual([]);
    expect(messages({ name: 'earlier', kind: 'agent', policy: { run: 'run-7', checkpoint: 'latest' } })).toEqual([]);
  });

  it('still needs the endpoint without a policy', () => {
    expect(messages({ name: 'agent', kind: 'agent' })).toEqual([
      'retrievers.0.baseUrl: baseUrl is required (or set policy: trained to serve a training checkpoint)',
      'retrievers.0.model: model is required (or set policy: trained to serve a training checkpoint)',
      'retrievers.0.answerFormat: answerFormat is required (or set policy: trained to serve a training checkpoint)',
    ]);
  });

  it('refuses an endpoint beside a policy, a checkpoint without one, a checkpoint given twice and a bad step', () => {
    expect(messages({ name: 't', kind: 'agent', policy: 'trained', baseUrl: 'http://127.0.0.1:8000/v1' })).toEqual([
      'retrievers.0.baseUrl: a trained policy is served by codegrep itself: leave baseUrl and model out',
    ]);
    expect(messages({ name: 'a', kind: 'agent', baseUrl: 'http://x/v1', model: 'm', answerFormat: 'codegrep', checkpoint: 3 })).toEqual([
      'retrievers.0.checkpoint: checkpoint goes with policy: trained (or policy: { run, checkpoint })',
    ]);
    expect(messages({ name: 't', kind: 'agent', policy: { run: 'r', checkpoint: 2 }, checkpoint: 3 })).toEqual([
      'retrievers.0.checkpoint: give the checkpoint once: in policy.checkpoint or in checkpoint',
    ]);
    expect(messages({ name: 't', kind: 'agent', policy: 'trained', checkpoint: 0 })[0]).toMatch(/checkpoint/);
    expect(messages({ name: 't', kind: 'agent', policy: 'mine' })[0]).toMatch(/^retrievers\.0\.policy/);
  });
});

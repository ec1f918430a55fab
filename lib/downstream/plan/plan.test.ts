import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DownstreamConfigSchema, type DownstreamConfigInput } from '../../../schemas/downstream/config';
import { recordPathFor } from '../layout';
import { planDownstreamRuns, planWarnings } from './plan';
import { policyColumns } from '../runs/run-pair';

const dir = mkdtempSync(path.join(os.tmpdir(), 'codegrep-downstream-plan-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const commit = 'a'.repeat(40);
const instance = (id: string) => ({ instance_id: id, repo: 'acme/calc', base_commit: commit, problem_statement: `issue ${id}` });
const jsonl = (name: string, rows: unknown[]) => {
  const file = path.join(dir, name);
  writeFileSync(file, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return file;
};
const instancesFile = jsonl('instances.jsonl', [
  instance('a-1'),
  { instance_id: 'bad', repo: 'no-slash' },
  instance('a-2'),
  instance('a-1'),
]);
const predictionsFile = jsonl('bm25.jsonl', [{ instance_id: 'a-2', found_files: ['src/ops.py', 'tests/test_ops.py'] }]);

function config(overrides: Partial<DownstreamConfigInput> = {}) {
  return DownstreamConfigSchema.parse({
    configurations: [
      { name: 'baseline', source: 'none' },
      { name: 'bm25', source: 'predictions', predictions: predictionsFile, k: 1 },
    ],
    baseline: 'baseline',
    agent: { kind: 'builtin', baseUrl: 'http://127.0.0.1:9/v1', model: 'frozen-coder' },
    harness: { kind: 'local' },
    ...overrides,
  });
}

const plan = (downstream = config()) => planDownstreamRuns({ runId: 'r', runDir: dir, config: downstream, instancesFile, predictions: {} });

describe('planDownstreamRuns', () => {
  it('plans every (configuration, instance) pair instance-major, with the predictions and the unreadable rows', async () => {
    const planning = await plan();
    expect(planning.plan.pairs.map((p) => [p.configuration, p.instanceId, p.predictedFiles])).toEqual([
      ['baseline', 'a-1', null],
      ['bm25', 'a-1', []],
      ['baseline', 'a-2', null],
      ['bm25', 'a-2', ['src/ops.py', 'tests/test_ops.py']],
    ]);
    expect(planning.pending.pairs).toEqual([
      [0, 0],
      [1, 0],
      [0, 1],
      [1, 1],
    ]);
    expect(planning.finished).toBe(0);
    expect(planning.plan.pairs[0]!.recordPath).toBe(recordPathFor(dir, 'baseline', 'a-1'));
    expect(planning.plan.configurations[1]).toMatchObject({
      k: 1,
      predictionsFrom: { format: 'jsonl', retriever: null },
      missingPredictions: ['a-1'],
    });
    expect(planning.invalidInstances).toHaveLength(2);
    expect(planWarnings(planning)).toEqual([
      expect.stringMatching(/^2 unreadable instance row\(s\) skipped \(first: row 2 \(bad\): column repo: /),
      'bm25: no prediction for 1 instance(s); they run with the issue unchanged',
    ]);
  });

  it('keys a run by what decides its result: the model, not where it is served', async () => {
    const [first, moved, other] = await Promise.all([
      plan(),
      plan(config({ agent: { kind: 'builtin', baseUrl: 'http://10.0.0.2:8000/v1', model: 'frozen-coder', callTimeoutMs: 1_000 } })),
      plan(config({ agent: { kind: 'builtin', baseUrl: 'http://127.0.0.1:9/v1', model: 'other-coder' } })),
    ]);
    expect(moved.plan.pairs.map((p) => p.runHash)).toEqual(first.plan.pairs.map((p) => p.runHash));
    expect(other.plan.pairs.map((p) => p.runHash)).not.toContain(first.plan.pairs[0]!.runHash);
  });

  it('names the config key of input problems a retry cannot fix', async () => {
    await expect(plan(config({ instances: ['a-2', 'bad', 'zz'] }))).rejects.toThrow(
      /^downstream\.instances: 2 id\(s\) are not valid instances of .*: bad, zz \(unreadable rows: row 2 \(bad\)/,
    );
    const missing = config({
      configurations: [
        { name: 'baseline', source: 'none' },
        { name: 'bm25', source: 'predictions', predictions: path.join(dir, 'nope.jsonl') },
      ],
    });
    await expect(plan(missing)).rejects.toThrow(/^downstream\.configurations\.1\.predictions \(bm25\): file .*nope\.jsonl does not exist$/);
    const retriever = config({
      configurations: [
        { name: 'baseline', source: 'none' },
        { name: 'bm25', source: 'predictions', predictions: predictionsFile, retriever: 'x' },
      ],
    });
    await expect(plan(retriever)).rejects.toThrow(/only a predictions Parquet file has retrievers/);
  });
});

describe('planDownstreamRuns on a trained policy', () => {
  it('records the checkpoint the injected predictions came from (served model, base model, step, adapter sha256)', async () => {
    const { writeParquetArtifact } = await import('../../artifacts');
    const { evaluationPredictionsArrowSchema } = await import('../../../schemas/evaluation');
    const row = (retriever: string, instanceId: string, served: boolean) => ({
      instanceId,
      retriever,
      kind: served ? 'agent' : 'bm25',
      files: ['src/ops.py'],
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
      ms: 1,
      servedModel: served ? 'r/step-00000002' : null,
      baseModel: served ? '/models/tiny' : null,
      checkpointStep: served ? 2 : null,
      adapterSha256: served ? 'cd'.repeat(32) : null,
    });
    const ref = await writeParquetArtifact({
      path: path.join(dir, 'predictions.parquet'),
      schemaName: 'evaluation.predictions',
      schemaVersion: 2,
      arrowSchema: evaluationPredictionsArrowSchema,
      rows: [row('bm25', 'a-1', false), row('trained', 'a-1', true), row('trained', 'a-2', true)],
      inputs: [],
      configHash: 'e'.repeat(64),
    });
    const downstream = config({
      configurations: [
        { name: 'baseline', source: 'none' },
        { name: 'trained', source: 'predictions' },
      ],
    });
    const planning = await planDownstreamRuns({
      runId: 'r',
      runDir: dir,
      config: downstream,
      instancesFile,
      predictions: { trained: ref },
    });
    expect(planning.plan.configurations[1]!.predictionsFrom).toMatchObject({
      retriever: 'trained',
      policy: { model: 'r/step-00000002', baseModel: '/models/tiny', step: 2, adapterSha256: 'cd'.repeat(32) },
    });
    // Every run of that configuration names the checkpoint in its row; the baseline's rows name none.
    expect(policyColumns(planning.plan.configurations[1]!)).toEqual({
      servedModel: 'r/step-00000002',
      baseModel: '/models/tiny',
      checkpointStep: 2,
      adapterSha256: 'cd'.repeat(32),
    });
    expect(policyColumns(planning.plan.configurations[0]!)).toEqual({
      servedModel: null,
      baseModel: null,
      checkpointStep: null,
      adapterSha256: null,
    });

    // The same files from another checkpoint are another run: its record must name that checkpoint.
    const other = await writeParquetArtifact({
      path: path.join(dir, 'predictions-other.parquet'),
      schemaName: 'evaluation.predictions',
      schemaVersion: 2,
      arrowSchema: evaluationPredictionsArrowSchema,
      rows: [row('bm25', 'a-1', false), row('trained', 'a-1', true), row('trained', 'a-2', true)].map((r) =>
        r.adapterSha256 ? { ...r, adapterSha256: 'ef'.repeat(32) } : r,
      ),
      inputs: [],
      configHash: 'e'.repeat(64),
    });
    const replanned = await planDownstreamRuns({
      runId: 'r',
      runDir: dir,
      config: downstream,
      instancesFile,
      predictions: { trained: other },
    });
    const hashes = (p: typeof planning) => p.plan.pairs.map((pair) => `${pair.configuration}:${pair.runHash}`);
    const [before, after] = [hashes(planning), hashes(replanned)];
    expect(after.filter((h) => h.startsWith('baseline:'))).toEqual(before.filter((h) => h.startsWith('baseline:')));
    const trainedAfter = after.filter((h) => h.startsWith('trained:'));
    expect(trainedAfter).toHaveLength(2);
    for (const h of trainedAfter) expect(before).not.toContain(h);
  });
});

describe('a configuration with source agent (a trained policy served for the stage)', () => {
  const agentConfig = (configuration: Record<string, unknown>) =>
    DownstreamConfigSchema.safeParse({
      configurations: [{ name: 'baseline', source: 'none' }, configuration],
      baseline: 'baseline',
      agent: { kind: 'builtin', baseUrl: 'http://127.0.0.1:9/v1', model: 'frozen-coder' },
      harness: { kind: 'local' },
    });
  const messages = (configuration: Record<string, unknown>) => {
    const parsed = agentConfig(configuration);
    return parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  };

  it('takes policy: trained or { run, checkpoint }, and refuses what does not go with it', () => {
    expect(messages({ name: 'trained', source: 'agent', policy: 'trained', checkpoint: 'best' })).toEqual([]);
    expect(messages({ name: 'earlier', source: 'agent', policy: { run: 'run-7', checkpoint: 4 }, concurrency: 2 })).toEqual([]);
    expect(messages({ name: 'trained', source: 'agent' })).toEqual([
      'configurations.1.policy: source "agent" needs policy: trained (this run\'s training) or policy: { run, checkpoint } (an earlier run)',
    ]);
    expect(messages({ name: 't', source: 'agent', policy: { run: 'r', checkpoint: 2 }, checkpoint: 3 })).toEqual([
      'configurations.1.checkpoint: give the checkpoint once: in policy.checkpoint or in checkpoint',
    ]);
    expect(messages({ name: 'bm25', source: 'predictions', predictions: '/p.jsonl', policy: 'trained' })).toEqual([
      'configurations.1.policy: only a configuration with source "agent" takes policy (this one has source "predictions")',
    ]);
    expect(messages({ name: 't', source: 'agent', policy: 'trained', predictions: '/p.jsonl' })).toEqual([
      'configurations.1.predictions: only a configuration with source "predictions" takes predictions (this one has source "agent")',
    ]);
  });

  it('is planned from the files its policy found, naming the checkpoint; without them the plan names the config key', async () => {
    const downstream = agentConfig({ name: 'trained agent', source: 'agent', policy: 'trained' });
    expect(downstream.success).toBe(true);
    await expect(planDownstreamRuns({ runId: 'r', runDir: dir, config: downstream.data!, instancesFile, predictions: {} })).rejects.toThrow(
      /downstream\.configurations\.1 \(trained agent\) has source "agent" but its policy's files were not retrieved/,
    );

    const { writeParquetArtifact } = await import('../../artifacts');
    const { evaluationPredictionsArrowSchema } = await import('../../../schemas/evaluation');
    const found = await writeParquetArtifact({
      path: path.join(dir, 'candidates.parquet'),
      schemaName: 'evaluation.predictions',
      schemaVersion: 2,
      arrowSchema: evaluationPredictionsArrowSchema,
      rows: ['a-1', 'a-2'].map((instanceId) => ({
        instanceId,
        retriever: 'trained_agent',
        kind: 'agent',
        files: [`src/${instanceId}.py`],
        ranked: null,
        lineRanges: [],
        modules: null,
        functions: null,
        turns: 2,
        toolCalls: 1,
        promptTokens: 10,
        completionTokens: 5,
        answerValid: true,
        endReason: 'answered',
        error: null,
        ms: 1,
        servedModel: 'r/step-00000002',
        baseModel: '/models/tiny',
        checkpointStep: 2,
        adapterSha256: 'ab'.repeat(32),
      })),
      inputs: [],
      configHash: 'f'.repeat(64),
    });
    const planning = await planDownstreamRuns({
      runId: 'r',
      runDir: dir,
      config: downstream.data!,
      instancesFile,
      predictions: { 'trained agent': found },
    });
    const planned = planning.plan.configurations[1]!;
    expect(planned).toMatchObject({ source: 'agent', predictionsFrom: { format: 'parquet', retriever: 'trained_agent' } });
    expect(policyColumns(planned)).toEqual({
      servedModel: 'r/step-00000002',
      baseModel: '/models/tiny',
      checkpointStep: 2,
      adapterSha256: 'ab'.repeat(32),
    });
    expect(planning.plan.pairs.filter((p) => p.configuration === 'trained agent').map((p) => p.predictedFiles)).toEqual([
      ['src/a-1.py'],
      ['src/a-2.py'],
    ]);
  });
});

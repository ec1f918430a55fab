import { mkdirSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { makeTempDir, fakeInputRef } from '../artifacts/test-helpers';
import { resolveConfig } from '../config';
import { answerLevelF1, isKept, keepThresholds, presetKeepThresholds } from './keep';
import { collectRft, readRftRows, readSftTokens, sftExampleLine, writeRftTrajectories } from './collect';
import { sftLayout, sftStepRows, sftTrainerConfig } from './sft';
import { hashConfig, writeParquetArtifact } from '../artifacts';
import { RFT_SCHEMA_VERSION, RFT_SHARD_SCHEMA_NAME, RftSftSchema, rftTrajectoryColumns, type RftTrajectoryRow } from '../../schemas/rft';
import path from 'node:path';

const gold = { files: ['src/cache.py'], modules: [], functions: ['src/cache.py:refresh_bucket_7'] };
const perfect = { file: 1, module: 1, function: 1 };

describe('which RFT rollouts are kept (CodeScout §4.1: F1 = 1.0 at file, module and function level)', () => {
  it('scores a CodeGrep answer at file level only: modules and functions are null, not zero', () => {
    expect(answerLevelF1({ files: ['src/cache.py'], lineRanges: [] }, 'codegrep', gold)).toEqual({ file: 1, module: null, function: null });
    expect(answerLevelF1({ files: ['src/cache.py', 'utils.py'], lineRanges: [] }, 'codegrep', gold).file).toBeCloseTo(2 / 3);
    expect(answerLevelF1(null, 'codegrep', gold)).toEqual({ file: 0, module: null, function: null });
  });

  it('scores a CodeScout answer at all three levels (an empty gold module set matched by none is F1 1)', () => {
    const right = { locations: [{ file: 'src/cache.py', function_name: 'refresh_bucket_7' }] };
    expect(answerLevelF1(right, 'codescout', gold)).toEqual({ file: 1, module: 1, function: 1 });
    const wrongFunction = { locations: [{ file: 'src/cache.py', function_name: 'load_token_3' }] };
    expect(answerLevelF1(wrongFunction, 'codescout', gold)).toEqual({ file: 1, module: 1, function: 0 });
  });

  it('reads the threshold from the rft preset (CodeScout §4.1: 1.0 at every level); the config may lower a level', () => {
    expect(presetKeepThresholds()).toEqual(perfect);
    expect(keepThresholds({ function: 0.5 })).toEqual({ ...perfect, function: 0.5 });
  });

  it('keeps only when every scored level reaches its threshold, and never a failed rollout', () => {
    expect(isKept({ file: 1, module: null, function: null }, perfect, false)).toBe(true);
    expect(isKept({ file: 0.99, module: null, function: null }, perfect, false)).toBe(false);
    expect(isKept({ file: 1, module: 1, function: 0 }, perfect, false)).toBe(false);
    expect(isKept({ file: 1, module: 1, function: 0 }, { ...perfect, function: 0 }, false)).toBe(true);
    expect(isKept({ file: 1, module: 1, function: 1 }, perfect, true)).toBe(false);
  });
});

const row = (instanceId: string, kept: boolean): RftTrajectoryRow => ({
  instanceId,
  teacher: 'scripted',
  reward: kept ? 1 : 0,
  fileF1: kept ? 1 : 0,
  moduleF1: null,
  functionF1: null,
  kept,
  endReason: 'answer',
  turns: 2,
  toolCalls: 1,
  error: null,
  messages: JSON.stringify([{ role: 'user', content: `issue ${instanceId}` }]),
  tools: JSON.stringify([{ type: 'function', function: { name: 'grep' } }]),
  inputIds: null,
  policyMask: null,
});

async function shard(dir: string, name: string, rows: RftTrajectoryRow[]) {
  return writeParquetArtifact({
    path: path.join(dir, `${name}.parquet`),
    schemaName: RFT_SHARD_SCHEMA_NAME,
    schemaVersion: RFT_SCHEMA_VERSION,
    arrowSchema: rftTrajectoryColumns.arrowSchema(),
    rows,
    inputs: [fakeInputRef(name)],
    configHash: hashConfig({ name }),
  });
}

describe('the RFT artifacts', () => {
  it('collects every shard once, writes the kept ones as trainer.sft examples, and joins its tokens_out', async () => {
    const { dir, cleanup } = await makeTempDir();
    try {
      const shards = [await shard(dir, 'a', [row('i-2', true), row('i-1', false)]), await shard(dir, 'b', [row('i-3', true)])];
      const collected = await collectRft(dir, shards);
      expect(collected).toMatchObject({ total: 3, kept: 2, failed: 0 });
      expect((await readRftRows(collected.sampled.uri)).map((r) => r.instanceId)).toEqual(['i-1', 'i-2', 'i-3']);
      const { readFile } = await import('node:fs/promises');
      const examples = (await readFile(collected.examplesPath, 'utf8'))
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(examples.map((e) => e.instance_id)).toEqual(['i-2', 'i-3']);
      expect(examples[0]).toEqual(JSON.parse(sftExampleLine(row('i-2', true))));

      const tokens = path.join(dir, 'tokens.jsonl');
      writeFileSync(
        tokens,
        ['i-2', 'i-3'].map((id) => JSON.stringify({ instance_id: id, input_ids: [1, 2, 3], policy_mask: [0, 1, 1] })).join('\n'),
      );
      const final = await writeRftTrajectories(dir, collected.sampled, tokens);
      const rows = await readRftRows(final.uri);
      expect(rows.map((r) => [r.instanceId, r.kept, r.inputIds, r.policyMask])).toEqual([
        ['i-1', false, null, null],
        ['i-2', true, [1, 2, 3], [0, 1, 1]],
        ['i-3', true, [1, 2, 3], [0, 1, 1]],
      ]);
      writeFileSync(tokens, JSON.stringify({ instance_id: 'i-2', input_ids: [1], policy_mask: [0] }) + '\n');
      await expect(writeRftTrajectories(dir, collected.sampled, tokens)).rejects.toThrow(
        /kept instance i-3 has no line in trainer.sft's tokens_out/,
      );
      await expect(collectRft(dir, [...shards, shards[1]!])).rejects.toThrow(/i-3 was sampled in two shards/);
      writeFileSync(tokens, JSON.stringify({ instance_id: 'i-2', input_ids: [1, 2], policy_mask: [0] }) + '\n');
      await expect(readSftTokens(tokens)).rejects.toThrow(/line 1: expected \{instance_id, input_ids, policy_mask\}/);
    } finally {
      await cleanup();
    }
  });

  it("records each SFT step once: a step redone by a later attempt is that attempt's", async () => {
    const { dir, cleanup } = await makeTempDir();
    try {
      const attempts = sftLayout(dir).attempts;
      mkdirSync(attempts, { recursive: true });
      const step = (n: number, loss: number) => JSON.stringify({ event: 'step', step: n, loss, lr: 1e-5 });
      writeFileSync(path.join(attempts, 'attempt-01.stdout.jsonl'), ['not json', step(1, 3), step(2, 2.5), step(3, 2.4)].join('\n') + '\n');
      writeFileSync(
        path.join(attempts, 'attempt-02.stdout.jsonl'),
        [JSON.stringify({ event: 'resumed', step: 2, checkpoint: 'x' }), step(3, 2.2), step(4, 2)].join('\n') + '\n',
      );
      expect(await sftStepRows(dir)).toEqual([
        { step: 1, loss: 3, lr: 1e-5, attempt: 1 },
        { step: 2, loss: 2.5, lr: 1e-5, attempt: 1 },
        { step: 3, loss: 2.2, lr: 1e-5, attempt: 2 },
        { step: 4, loss: 2, lr: 1e-5, attempt: 2 },
      ]);
    } finally {
      await cleanup();
    }
  });

  it('writes trainer.sft only the keys the section sets, so the rft preset supplies the paper values', () => {
    const layout = sftLayout('/runs/r');
    const config = sftTrainerConfig(RftSftSchema.parse({ lr: 1e-4, finetune: 'full' }), { modelDir: '/m', recipe: 'codescout', layout });
    expect(config).toEqual({
      model_dir: '/m',
      output_dir: '/runs/r/rft/sft/trainer',
      examples_path: '/runs/r/rft/sft/examples.jsonl',
      tokens_out: '/runs/r/rft/sft/tokens.jsonl',
      seed: 0,
      recipe: 'codescout',
      lr: 1e-4,
      finetune: 'full',
    });
  });
});

describe('the rft config section', () => {
  it('refuses RFT instances that are also held out for validation or evaluation, naming them', async () => {
    const { dir, cleanup } = await makeTempDir();
    try {
      writeFileSync(path.join(dir, 't.jsonl'), '');
      const base = {
        runId: 'r',
        dataDir: dir,
        inputs: { trajectories: 't.jsonl', instances: 't.jsonl' },
        training: { modelDir: 'm', steps: 2, checkpointEvery: 1, validation: { instances: ['v-1', 'x-2'], every: 1 } },
        rft: { instances: ['x-1', 'x-2', 'x-3'], teacher: { baseUrl: 'http://127.0.0.1:1/v1', model: 't' } },
      };
      expect(() => resolveConfig(base, 'cfg.yaml', dir)).toThrow(
        /rft.instances and training.validation.instances overlap: x-2; an instance the policy was fine-tuned on cannot be held out/,
      );
      expect(() =>
        resolveConfig({ ...base, training: { modelDir: 'm', steps: 2 }, evaluation: { instances: ['x-3', 'x-1'] } }, 'cfg.yaml', dir),
      ).toThrow(/rft.instances and evaluation.instances overlap: x-3, x-1/);
      expect(() => resolveConfig({ ...base, training: undefined }, 'cfg.yaml', dir)).toThrow(/rft: needs a `training` section/);
      const fine = resolveConfig(
        { ...base, training: { modelDir: 'm', steps: 2 }, rft: { ...base.rft, sft: { modelDir: 'student' } } },
        'cfg.yaml',
        dir,
      );
      expect(fine.rft?.sft.modelDir).toBe(path.join(dir, 'student'));
      expect(() => resolveConfig({ ...base, rft: { ...base.rft, instances: ['a', 'a'] } }, 'cfg.yaml', dir)).toThrow(
        /instance "a" is listed twice/,
      );
    } finally {
      await cleanup();
    }
  });
});

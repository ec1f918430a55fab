import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ResolvedTrainingConfig } from '../../schemas/training/config';
import { TrainerConfigSchema } from '../../schemas/training/trainer-config';
import { trainerConfig } from './trainer-config';
import { TRAINER_CONFIG_SCHEMA_FILE, trainerConfigJsonSchema } from './trainer-config-schema';

const root = path.resolve(__dirname, '../..');

describe('the trainer config contract', () => {
  it('trainer/config.schema.json is the JSON Schema of TrainerConfigSchema (else: npx tsx scripts/write-trainer-config-schema.ts)', () => {
    expect(readFileSync(path.join(root, TRAINER_CONFIG_SCHEMA_FILE), 'utf8')).toBe(trainerConfigJsonSchema());
  });

  it('the config the training activity writes for a segment matches it', () => {
    const section = {
      modelDir: '/models/qwen3',
      recipe: 'v2',
      algorithm: 'gspo',
      steps: 100,
      segmentSteps: 10,
      seed: 3,
      codescoutTurnBonus: false,
      groupSize: 4,
      batchSize: 2,
      lr: 1e-5,
      klBeta: 0,
      limits: { maxTurns: 3, maxNewTokens: 256, maxSeqLen: 4096 },
      lora: { r: 8, alpha: 16 },
      checkpointEvery: 5,
      keepCheckpoints: 2,
      maskUnansweredAtTurnLimit: true,
      trainer: { generator: 'hf', dtype: 'float32' },
      python: '/p',
      gpuTaskQueue: 'q',
      stopGraceMs: 1000,
      progressEveryMs: 1000,
      smokeRun: false,
      gpus: 1,
    } as unknown as ResolvedTrainingConfig;
    const config = trainerConfig(section, {
      outputDir: '/run/training/trainer',
      envUrl: 'http://127.0.0.1:1',
      instanceIds: ['a', 'b'],
      totalSteps: 100,
    });
    expect(TrainerConfigSchema.safeParse(config).error?.issues ?? []).toEqual([]);
    expect(TrainerConfigSchema.safeParse({ ...config, total_step: 3 }).success).toBe(false);
  });
});

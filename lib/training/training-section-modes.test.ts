import { describe, expect, it } from 'vitest';
import { PAPER_SETUPS, ResolvedTrainingConfigSchema, TrainingConfigSchema } from '../../schemas/training/config';
import { TrainerConfigSchema } from '../../schemas/training/trainer-config';
import { RECIPE_PRESETS } from '../recipes';
import { environmentLimits, trainerConfig } from './trainer-config';

// The training section's mode / maxStaleness / paperSetup / finetune (CodeScout §3.4, §4.1) and their trainer keys.

const run = { outputDir: 'o', envUrl: 'http://127.0.0.1:1', instanceIds: ['a'], totalSteps: 10 };
const resolved = (section: Record<string, unknown>) =>
  ResolvedTrainingConfigSchema.parse({ modelDir: '/m', steps: 10, gpuTaskQueue: 'q', ...section });
const issues = (section: Record<string, unknown>) =>
  (TrainingConfigSchema.safeParse({ modelDir: '/m', steps: 10, ...section }).error?.issues ?? []).map(
    (i) => `${i.path.join('.')}: ${i.message}`,
  );

describe('the training section: async mode, paper setups, full fine-tuning', () => {
  it('passes mode, max_staleness, paper_setup and finetune to the trainer config, which its schema accepts', () => {
    const config = trainerConfig(
      resolved({ recipe: 'codescout', mode: 'async', maxStaleness: 2, paperSetup: 'codescout-4b', finetune: 'full' }),
      run,
    );
    expect(config).toMatchObject({ mode: 'async', max_staleness: 2, paper_setup: 'codescout-4b', finetune: 'full' });
    expect(TrainerConfigSchema.safeParse(config).error?.issues ?? []).toEqual([]);
    expect(trainerConfig(resolved({ mode: 'sync', finetune: 'lora' }), run)).toMatchObject({ mode: 'sync', finetune: 'lora' });
  });

  it('writes none of them when the section leaves them out (the preset or the trainer decides)', () => {
    const config = trainerConfig(resolved({}), run);
    for (const key of ['mode', 'max_staleness', 'paper_setup', 'finetune']) expect(config).not.toHaveProperty(key);
  });

  it("gives the environment and the trainer the setup's turn limit unless the section sets one", () => {
    const setup = resolved({ recipe: 'codescout', paperSetup: 'codescout-4b' });
    expect(environmentLimits(setup).maxTurns).toBe(6); // CodeScout §4.1: 4B, 6 turns
    expect(trainerConfig(setup, run)).toMatchObject({ max_turns: 6 });
    const own = resolved({ recipe: 'codescout', paperSetup: 'codescout-4b', limits: { maxTurns: 3 } });
    expect(trainerConfig(own, run)).toMatchObject({ max_turns: 3 });
  });

  it('refuses maxStaleness below 1 with async, and maxStaleness without async', () => {
    expect(issues({ mode: 'async', maxStaleness: 0 })).toEqual(['maxStaleness: maxStaleness must be at least 1']);
    expect(issues({ mode: 'async', maxStaleness: 1.5 })[0]).toMatch(/^maxStaleness: /);
    expect(issues({ maxStaleness: 2 })).toEqual([
      'maxStaleness: only applies with mode: async (mode is sync, the default); set mode: async or drop maxStaleness',
    ]);
    expect(issues({ mode: 'sync', maxStaleness: 2 })[0]).toMatch(/^maxStaleness: only applies with mode: async \(mode is sync\)/);
    expect(issues({ mode: 'async', maxStaleness: 4 })).toEqual([]);
    // A paper setup trains asynchronously (lib/recipes/presets.json), so its staleness may be changed.
    expect(issues({ recipe: 'codescout', paperSetup: 'codescout-4b', maxStaleness: 2 })).toEqual([]);
    expect(issues({ mode: 'lockstep' })[0]).toMatch(/^mode: /);
  });

  it('refuses an unknown paper setup naming the allowed ones, and a setup with a recipe other than codescout', () => {
    expect(issues({ recipe: 'codescout', paperSetup: 'codescout-7b' })).toEqual([
      'paperSetup: unknown paper setup "codescout-7b"; expected one of codescout-1.7b, codescout-4b, codescout-14b',
    ]);
    expect(issues({ paperSetup: 'codescout-14b' })).toEqual([
      'recipe: paperSetup codescout-14b trains with the codescout recipe (CodeScout §4.1); set recipe: codescout (got v3)',
    ]);
  });

  it('refuses async training on several trainer processes, which the trainer does not support', () => {
    expect(issues({ mode: 'async', gpus: 2 })).toEqual(['gpus: async training (mode: async) runs one trainer process; set gpus: 1']);
    expect(issues({ recipe: 'codescout', paperSetup: 'codescout-4b', gpus: 2 })).toEqual([
      'gpus: async training (paperSetup codescout-4b) runs one trainer process; set gpus: 1 or mode: sync',
    ]);
    expect(issues({ recipe: 'codescout', paperSetup: 'codescout-4b', mode: 'sync', gpus: 2 })).toEqual([]);
  });

  it('refuses a finetune other than lora or full', () => {
    expect(issues({ finetune: 'qlora' })[0]).toMatch(/^finetune: /);
  });

  it('names exactly the setups of lib/recipes/presets.json, each a codescout one trained asynchronously', () => {
    const setups = Object.entries(RECIPE_PRESETS.setups).filter(([name]) => name !== '$comment');
    expect(setups.map(([name]) => name).sort()).toEqual([...PAPER_SETUPS].sort());
    for (const [, setup] of setups) {
      expect(typeof setup === 'object' && setup.recipe?.value).toBe('codescout');
      expect(typeof setup === 'object' && setup.mode?.value).toBe('async'); // what the section's checks assume
    }
  });
});

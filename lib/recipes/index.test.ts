import { describe, expect, it } from 'vitest';
import { recipeDefinition } from '../envserver';
import { effectiveAlgorithm, RECIPE_PRESETS, recipePreset, rftPreset, trainerRecipeName } from './index';

describe('recipe presets (lib/recipes/presets.json, shared with trainer/recipes.py)', () => {
  it("gives each recipe the paper's answer format, masking, turn limit and algorithm", () => {
    expect(recipePreset('codescout')).toEqual({
      answerFormat: 'codescout',
      maskUnansweredAtTurnLimit: true,
      maxTurns: 4,
      algorithm: 'gspo',
    });
    for (const v of ['v1', 'v2', 'v3'] as const) {
      expect(recipePreset(v)).toEqual({ answerFormat: 'codegrep', maskUnansweredAtTurnLimit: false, maxTurns: 4, algorithm: 'grpo' });
    }
    expect(RECIPE_PRESETS.recipes.codescout.lr).toEqual({ value: 1e-6, source: 'CodeScout §4.1: constant learning rate 1e-6' });
  });

  it('names recipes as the trainer does and lets an explicit algorithm win', () => {
    expect(trainerRecipeName('v3')).toBe('codegrep-v3');
    expect(trainerRecipeName('codescout')).toBe('codescout');
    expect(effectiveAlgorithm({ recipe: 'codescout' })).toBe('gspo');
    expect(effectiveAlgorithm({ recipe: 'codescout', algorithm: 'drgrpo' })).toBe('drgrpo');
  });

  it("is where the environment's recipe definition comes from", () => {
    expect(recipeDefinition('codescout')).toEqual({ recipe: 'codescout', answerFormat: 'codescout', maskUnansweredAtTurnLimit: true });
    expect(recipeDefinition('v2')).toEqual({ recipe: 'v2', answerFormat: 'codegrep', maskUnansweredAtTurnLimit: false });
  });

  it("holds CodeScout's RFT warm start once, every value cited (CodeScout §4.1)", () => {
    const rft = rftPreset('codescout');
    expect(rft.keep_min_f1.value).toEqual({ file: 1, module: 1, function: 1 });
    expect([rft.lr.value, rft.lr_schedule.value, rft.warmup_ratio.value, rft.global_batch_size.value, rft.epochs.value]).toEqual([
      5e-5,
      'cosine',
      0.1,
      8,
      1,
    ]);
    expect([rft.rl_steps.value, rft.rl_instances.value, rft.optimizer.value]).toEqual([100, 800, 'adamw']);
    for (const entry of Object.values(rft)) expect(entry.source).toMatch(/^CodeScout §4\.1/);
  });
});

import { describe, expect, it } from 'vitest';
import { recipeDefinition } from '../envserver';
import { effectiveAlgorithm, RECIPE_PRESETS, recipePreset, trainerRecipeName } from './index';

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
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runTool } from '../sandbox';
import { codeGrepReward, codeScoutReward, advantageScale } from '../rewards';
import { locationsToSets } from '../metrics/levels';
import type { ToolRunner } from '../agent';
import type { TrainingRecipe } from '../../schemas/training/config';
import { createTrainingEnvironment } from './environment';
import { loadEnvSamples, type EnvSample } from './env-samples';
import { EnvRequestError } from './protocol';
import { buildEnvFixture, CATM_FILE, lineOf, qwen3ToolCalls, type EnvFixture } from '../../test/fixtures/envserver/fixture';

let fixture: EnvFixture;
let samples: Map<string, EnvSample>;
const GEARS = 'widgets/gears.py';

beforeAll(async () => {
  fixture = await buildEnvFixture();
  samples = (await loadEnvSamples(fixture.samples.uri, 'v2')).samples;
});
afterAll(() => fixture?.cleanup());

function counting(): { runner: ToolRunner; calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    runner: async (root, name, args, options) => {
      calls.push(name);
      return runTool(root, name, args, options);
    },
  };
}

function env(recipe: TrainingRecipe, extra: { maxTurns?: number; codescoutTurnBonus?: boolean; runner?: ToolRunner } = {}) {
  return createTrainingEnvironment({
    samples,
    recipe,
    limits: extra.maxTurns ? { maxTurns: extra.maxTurns } : {},
    codescoutTurnBonus: extra.codescoutTurnBonus ?? false,
    ...(extra.runner ? { toolRunner: extra.runner } : {}),
    idPrefix: 'ep',
  });
}

async function rejection(promise: Promise<unknown> | (() => unknown)): Promise<EnvRequestError> {
  try {
    await (typeof promise === 'function' ? promise() : promise);
  } catch (error) {
    if (error instanceof EnvRequestError) return error;
    throw error;
  }
  throw new Error('expected the request to be refused');
}

const answer = (body: unknown) => `<think>\nI have seen enough.\n</think>\n<answer>${JSON.stringify(body)}</answer>`;

describe('open', () => {
  it('opens groupSize episodes per instance in request order, with the issue prompt and the recipe tools', async () => {
    const e = env('v2');
    const opened = await e.open({ instanceIds: ['acme__widgets-2', 'acme__widgets-1'], groupSize: 2, seed: 7 });
    expect(opened.episodes.map((o) => [o.episodeId, o.instanceId])).toEqual([
      ['ep-0', 'acme__widgets-2'],
      ['ep-1', 'acme__widgets-2'],
      ['ep-2', 'acme__widgets-1'],
      ['ep-3', 'acme__widgets-1'],
    ]);
    const first = opened.episodes[0]!;
    expect(first.messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(first.messages[1]!.content).toContain('belt_length ignores the pulley circumference.');
    expect(first.messages[1]!.content).toContain('Repository: acme/widgets');
    expect(first.tools.map((t) => t.function.name)).toEqual(['grep', 'glob', 'read']);
    expect(e.stats()).toMatchObject({ opened: 4, open: 4, closed: 0 });

    const scout = await env('codescout').open({ instanceIds: ['acme__widgets-1'], groupSize: 1, seed: 0 });
    expect(scout.episodes[0]!.tools.map((t) => t.function.name)).toEqual(['terminal', 'localization_finish']);
  });

  it('refuses unknown instances and malformed bodies, naming the field, and opens nothing then', async () => {
    const e = env('v3');
    const unknown = await rejection(e.open({ instanceIds: ['acme__widgets-1', 'nope__nope-1'], groupSize: 2, seed: 0 }));
    expect(unknown.status).toBe(400);
    expect(unknown.message).toBe('/episodes/open: instanceIds[1]: unknown instance "nope__nope-1" (not a trainable sample of this run)');
    const badGroup = await rejection(e.open({ instanceIds: ['acme__widgets-1'], groupSize: 0, seed: 0 }));
    expect(badGroup.status).toBe(400);
    expect(badGroup.message).toMatch(/^\/episodes\/open: groupSize: /);
    const missingSeed = await rejection(e.open({ instanceIds: ['acme__widgets-1'], groupSize: 1 }));
    expect(missingSeed.message).toMatch(/^\/episodes\/open: seed: /);
    expect(e.stats().opened).toBe(0);
  });
});

describe('step and close (CodeGrep v2)', () => {
  it('runs the raw Qwen3 tool calls in the worktree, then scores the hand-written answer exactly as lib/rewards does', async () => {
    const { runner, calls } = counting();
    const e = env('v2', { runner });
    const [episode] = (await e.open({ instanceIds: ['acme__widgets-1'], groupSize: 1, seed: 1 })).episodes;
    const id = episode!.episodeId;
    const defLine = lineOf(fixture.worktrees['acme__widgets-1']!, GEARS, 'def circumference');

    const turn1 = await e.step({
      steps: [
        {
          episodeId: id,
          assistantText: qwen3ToolCalls('Where is circumference?', [
            { name: 'grep', arguments: { pattern: 'def circumference' } },
            { name: 'read', arguments: { path: GEARS, start_line: 1, end_line: 5 } },
          ]),
        },
      ],
    });
    const [result1] = turn1.results;
    expect(result1!.done).toBe(false);
    expect(calls).toEqual(['grep', 'read']);
    expect(result1!.observations.map((o) => [o.role, 'name' in o ? o.name : null])).toEqual([
      ['tool', 'grep'],
      ['tool', 'read'],
    ]);
    expect(result1!.observations[0]!.content).toContain(`${GEARS}:${defLine}:`);
    expect(result1!.observations[1]!.content).toContain('TEETH_DEFAULT = 12');

    const predicted = { files: [GEARS], line_ranges: [{ file: GEARS, start: 9, end: 15 }] };
    const turn2 = await e.step({ steps: [{ episodeId: id, assistantText: answer(predicted), truncated: false }] });
    expect(turn2.results).toEqual([{ episodeId: id, done: true, observations: [] }]);

    const closed = e.close({ episodeIds: [id] });
    const expected = codeGrepReward('v2', {
      toolCalls: 2,
      turns: 2,
      predictedFiles: [GEARS],
      predictedLineRanges: [{ path: GEARS, start: 9, end: 15 }],
      targetFiles: [GEARS, CATM_FILE],
      patchFiles: [GEARS],
      goldLineRanges: fixture.truths['acme__widgets-1']!.lineRanges,
    });
    // By hand: files P=1, R=1/2 -> F0.5 = 5/6; ranges P=1, R=1/2 -> 5/6; v2 = ½(5/6 + 5/6); c̄ = 2/2 = 1 -> s = ½.
    expect(expected.total).toBeCloseTo(5 / 6, 12);
    expect(closed.results).toEqual([
      {
        episodeId: id,
        reward: expected.total,
        components: { file_fbeta: 5 / 6, file_precision: 1, file_recall: 0.5, line_fbeta: expected.components.lineRange!.f, tool_mask: 1 },
        toolCallsPerTurn: 1,
        advantageScale: 0.5,
        turns: 2,
        answered: true,
        hitTurnLimit: false,
      },
    ]);
    expect(e.stats()).toMatchObject({ opened: 1, closed: 1, open: 0, stepRequests: 2, turns: 2 });
  });

  it('tells the model on its second-to-last turn to answer next, and ends at the turn limit', async () => {
    const e = env('v3', { maxTurns: 2 });
    const [episode] = (await e.open({ instanceIds: ['acme__widgets-2'], groupSize: 1, seed: 1 })).episodes;
    const id = episode!.episodeId;
    const look = qwen3ToolCalls('look', [{ name: 'glob', arguments: { pattern: '**/*.py' } }]);
    const first = (await e.step({ steps: [{ episodeId: id, assistantText: look }] })).results[0]!;
    expect(first.observations.map((o) => o.role)).toEqual(['tool', 'user']);
    expect(first.observations[0]!.content).toContain('widgets/belts.py');
    expect(first.observations[1]!.content).toContain('Your next turn is the last one');
    const second = (await e.step({ steps: [{ episodeId: id, assistantText: look }] })).results[0]!;
    expect(second.done).toBe(true);
    const [score] = e.close({ episodeIds: [id] }).results;
    // Two turns, one executed call (the last turn's call is never run), no answer.
    expect(score).toMatchObject({
      reward: 0,
      toolCallsPerTurn: 0.5,
      advantageScale: advantageScale(0.5),
      turns: 2,
      answered: false,
      hitTurnLimit: true,
    });
  });

  it('runs no tools for a truncated turn and ends the episode; a reply without tool calls ends it too', async () => {
    const { runner, calls } = counting();
    const e = env('v2', { runner });
    const ids = (await e.open({ instanceIds: ['acme__widgets-1'], groupSize: 2, seed: 3 })).episodes.map((o) => o.episodeId);
    const results = await e.step({
      steps: [
        { episodeId: ids[0]!, assistantText: qwen3ToolCalls('cut', [{ name: 'grep', arguments: { pattern: 'mesh' } }]), truncated: true },
        { episodeId: ids[1]!, assistantText: 'I do not know.' },
      ],
    });
    expect(results.results.map((r) => [r.done, r.observations.length])).toEqual([
      [true, 0],
      [true, 0],
    ]);
    expect(calls).toEqual([]);
    const scores = e.close({ episodeIds: ids }).results;
    // v2's mask 1[c̄ > 0] and s(0) = 0: a rollout without tool use earns nothing and moves nothing.
    expect(scores.map((s) => [s.reward, s.toolCallsPerTurn, s.advantageScale, s.answered])).toEqual([
      [0, 0, 0, false],
      [0, 0, 0, false],
    ]);
  });

  it('scores episodes closed before they ended (an aborted step) from the turns they took', async () => {
    const e = env('v1');
    const ids = (await e.open({ instanceIds: ['acme__widgets-2'], groupSize: 2, seed: 3 })).episodes.map((o) => o.episodeId);
    const calls = Array.from({ length: 10 }, (_, i) => ({ name: 'grep', arguments: { pattern: `belt${i}` } }));
    await e.step({ steps: [{ episodeId: ids[0]!, assistantText: qwen3ToolCalls('many', calls) }] });
    const scores = e.close({ episodeIds: ids }).results;
    // Ten calls in one turn, eight run (the per-turn limit): c̄ = 8; v1 scales rewards, never advantages.
    expect(scores[0]).toMatchObject({ episodeId: ids[0], reward: 0, toolCallsPerTurn: 8, advantageScale: 1, turns: 1, answered: false });
    expect(scores[0]!.components).toEqual({ file_fbeta: 0, file_precision: 0, file_recall: 0, line_fbeta: 0, reward_scale: 0.5 });
    expect(scores[1]).toMatchObject({ episodeId: ids[1], reward: 0, toolCallsPerTurn: 0, turns: 0, answered: false, hitTurnLimit: false });
    expect(scores[1]!.components).toEqual({ file_fbeta: 0, file_precision: 0, file_recall: 0, line_fbeta: 0, reward_scale: 0 });
  });

  it('refuses unknown, repeated, finished and closed episodes with 404 / 400 / 409', async () => {
    const e = env('v3');
    const ids = (await e.open({ instanceIds: ['acme__widgets-1'], groupSize: 2, seed: 0 })).episodes.map((o) => o.episodeId);
    const unknown = await rejection(
      e.step({
        steps: [
          { episodeId: ids[0]!, assistantText: 'x' },
          { episodeId: 'ep-99', assistantText: 'x' },
        ],
      }),
    );
    expect([unknown.status, unknown.message]).toEqual([
      404,
      '/episodes/step: steps[1].episodeId: unknown episode "ep-99" (never opened, already closed, or opened by another server)',
    ]);
    expect(e.stats().turns).toBe(0); // nothing of a refused request ran
    const twice = await rejection(
      e.step({
        steps: [
          { episodeId: ids[0]!, assistantText: 'x' },
          { episodeId: ids[0]!, assistantText: 'y' },
        ],
      }),
    );
    expect([twice.status, twice.message]).toEqual([400, `/episodes/step: steps[1]: episode "${ids[0]}" is listed twice`]);
    const badField = await rejection(e.step({ steps: [{ episodeId: ids[0]!, assistantText: 42 }] }));
    expect(badField.status).toBe(400);
    expect(badField.message).toMatch(/^\/episodes\/step: steps\[0\]\.assistantText: /);

    await e.step({ steps: [{ episodeId: ids[0]!, assistantText: 'no tools' }] });
    const finished = await rejection(e.step({ steps: [{ episodeId: ids[0]!, assistantText: 'again' }] }));
    expect([finished.status, finished.message]).toEqual([409, `/episodes/step: steps[0]: episode ${ids[0]} is already done; close it`]);

    e.close({ episodeIds: [ids[0]!] });
    const closedTwice = await rejection(() => e.close({ episodeIds: [ids[0]!] }));
    expect(closedTwice.status).toBe(404);
    expect(closedTwice.message).toContain('episodeIds[0]: unknown episode');
    expect(e.stats()).toMatchObject({ open: 1, closed: 1 });
  });
});

describe('other recipes', () => {
  it('v3 scores files only (against G(x)); v1 discounts rewards above four calls per turn', async () => {
    for (const recipe of ['v1', 'v3'] as const) {
      const e = env(recipe);
      const [episode] = (await e.open({ instanceIds: ['acme__widgets-1'], groupSize: 1, seed: 0 })).episodes;
      const id = episode!.episodeId;
      const six = Array.from({ length: 6 }, (_, i) => ({ name: 'grep', arguments: { pattern: `teeth${i}` } }));
      await e.step({ steps: [{ episodeId: id, assistantText: qwen3ToolCalls('search', six) }] });
      await e.step({ steps: [{ episodeId: id, assistantText: answer({ files: [GEARS, CATM_FILE, 'widgets/belts.py'] }) }] });
      const [score] = e.close({ episodeIds: [id] }).results;
      const expected = codeGrepReward(recipe, {
        toolCalls: 6,
        turns: 2,
        predictedFiles: [GEARS, CATM_FILE, 'widgets/belts.py'],
        predictedLineRanges: [],
        targetFiles: [GEARS, CATM_FILE],
        patchFiles: [GEARS],
        goldLineRanges: fixture.truths['acme__widgets-1']!.lineRanges,
      });
      expect(score!.reward).toBe(expected.total);
      expect(score!.toolCallsPerTurn).toBe(3);
      if (recipe === 'v3') {
        // P = 2/3, R = 1: F0.5 = 1.25·(2/3)/(0.25·(2/3) + 1) = 5/7; c̄ = 3 -> s = sqrt(3/4).
        expect(score!.reward).toBeCloseTo(5 / 7, 12);
        expect(score!.advantageScale).toBeCloseTo(Math.sqrt(0.75), 12);
        expect(Object.keys(score!.components)).toEqual(['file_fbeta', 'file_precision', 'file_recall', 'tool_mask']);
      } else {
        // c̄ = 3 <= 4: no discount; no range predicted -> Flr = 0; ½(5/7 + 0).
        expect(score!.reward).toBeCloseTo(5 / 14, 12);
        expect(score!.advantageScale).toBe(1);
        expect(score!.components.reward_scale).toBe(1);
      }
    }
  });

  it('CodeScout: terminal commands run in the worktree, localization_finish is scored with the F1 sum and the turn bonus', async () => {
    const e = env('codescout', { maxTurns: 2, codescoutTurnBonus: true });
    const [episode] = (await e.open({ instanceIds: ['acme__widgets-1'], groupSize: 1, seed: 0 })).episodes;
    const id = episode!.episodeId;
    const first = (
      await e.step({
        steps: [
          {
            episodeId: id,
            assistantText: qwen3ToolCalls('find it', [{ name: 'terminal', arguments: { command: "rg -n 'def mesh' widgets" } }]),
          },
        ],
      })
    ).results[0]!;
    expect(first.observations[0]!.content).toMatch(/gears\.py:19:def mesh\(a, b\):/);
    const locations = [{ file: GEARS, class_name: 'Gear', function_name: 'circumference' }];
    const finish = qwen3ToolCalls('done', [{ name: 'localization_finish', arguments: { locations } }]);
    expect((await e.step({ steps: [{ episodeId: id, assistantText: finish }] })).results[0]!.done).toBe(true);
    const [score] = e.close({ episodeIds: [id] }).results;
    const expected = codeScoutReward({
      toolCalls: 1,
      turns: 2,
      predicted: locationsToSets(locations),
      gold: {
        files: [GEARS],
        modules: ['widgets/gears.py:Gear'],
        functions: ['widgets/gears.py:Gear.circumference', 'widgets/gears.py:mesh'],
      },
      finishCalls: 1,
      turnLimit: 2,
    });
    // F1: file 1, module 1, function 2/3 (P 1, R 1/2); ended in exactly 2 = k turns: +1.
    expect(expected.total).toBeCloseTo(1 + 1 + 2 / 3 + 1, 12);
    expect(score).toEqual({
      episodeId: id,
      reward: expected.total,
      components: { file_f1: 1, module_f1: 1, function_f1: expected.components.levels.function.f1, turn_bonus: 1, finished_once: 1 },
      toolCallsPerTurn: 0.5,
      advantageScale: 1,
      turns: 2,
      answered: true,
      hitTurnLimit: true,
    });
  });

  it('CodeScout: a finish call with arguments outside the schema does not finish: the reward is 0 despite the turn bonus', async () => {
    const e = env('codescout', { maxTurns: 1, codescoutTurnBonus: true });
    const [episode] = (await e.open({ instanceIds: ['acme__widgets-2'], groupSize: 1, seed: 0 })).episodes;
    const bad = qwen3ToolCalls('done', [{ name: 'localization_finish', arguments: { locations: 'widgets/belts.py' } }]);
    await e.step({ steps: [{ episodeId: episode!.episodeId, assistantText: bad }] });
    const [score] = e.close({ episodeIds: [episode!.episodeId] }).results;
    // The components are the reward's parts before CodeScout's finish gate; the gate zeroes the total.
    expect(score).toMatchObject({ reward: 0, answered: true, hitTurnLimit: true, components: { turn_bonus: 1, finished_once: 0 } });
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { envSampleFromRow, loadEnvSamples } from './env-samples';
import { buildEnvFixture, CATM_FILE, type EnvFixture } from '../../test/fixtures/envserver/fixture';

let fixture: EnvFixture;

beforeAll(async () => {
  fixture = await buildEnvFixture((base) => {
    const [one] = base as [Record<string, unknown>];
    return [
      { ...one, instanceId: 'acme__widgets-broken', groundTruthError: 'gold patch: no file headers' },
      { ...one, instanceId: 'acme__widgets-noworktree', worktreePath: null, groundTruthError: 'no worktree for this commit' },
      { ...one, instanceId: 'acme__widgets-gone', worktreePath: path.join(String(one.worktreePath), 'not-there') },
      {
        ...one,
        instanceId: 'acme__widgets-created',
        goldFiles: ['widgets/springs.py'],
        targetFiles: ['widgets/springs.py'],
        catmFiles: [],
        gold_files: ['widgets/springs.py'],
        gold_line_ranges: [{ path: 'widgets/springs.py', start: 1, end: 3 }],
        gold_changed_line_ranges: [],
        gold_modules: [],
        gold_functions: ['widgets/springs.py:stiffness'],
        gold_new_files: ['widgets/springs.py'],
      },
      {
        ...one,
        instanceId: 'acme__widgets-mixed',
        goldFiles: ['widgets/gears.py', 'widgets/springs.py'],
        targetFiles: ['widgets/gears.py', 'widgets/springs.py'],
        catmFiles: [],
        gold_files: ['widgets/gears.py', 'widgets/springs.py'],
        gold_line_ranges: [
          { path: 'widgets/gears.py', start: 9, end: 15 },
          { path: 'widgets/springs.py', start: 1, end: 3 },
        ],
        gold_modules: ['widgets/gears.py:Gear'],
        gold_functions: ['widgets/gears.py:mesh', 'widgets/springs.py:stiffness'],
        gold_new_files: ['widgets/springs.py'],
      },
      { ...one },
    ];
  });
});
afterAll(() => fixture?.cleanup());

describe('loadEnvSamples', () => {
  it("maps each row to this node's worktree when told to (shared-nothing nodes); a row it cannot map is skipped with its reason", async () => {
    const moved = new Map(Object.entries(fixture.worktrees).map(([id, dir]) => [dir, id === 'acme__widgets-2' ? null : dir]));
    const seen: unknown[] = [];
    const loaded = await loadEnvSamples(fixture.samples.uri, 'v3', {
      worktreePath: (row) => {
        seen.push(row.worktreePath);
        return moved.has(String(row.worktreePath)) ? moved.get(String(row.worktreePath))! : String(row.worktreePath);
      },
    });
    expect(loaded.instanceIds).toEqual(['acme__widgets-1', 'acme__widgets-mixed']);
    expect(loaded.skipped.find((s) => s.instanceId === 'acme__widgets-2')!.reason).toMatch(
      /^no worktree on this node for acme\/widgets@[0-9a-f]{40}$/,
    );
    expect(seen.length).toBeGreaterThan(0);
  });

  it('reads the environment samples Parquet into trainable samples with their worktrees and reward targets', async () => {
    const loaded = await loadEnvSamples(fixture.samples.uri, 'v3');
    expect(loaded.instanceIds).toEqual(['acme__widgets-1', 'acme__widgets-2', 'acme__widgets-mixed']);
    const one = loaded.samples.get('acme__widgets-1')!;
    expect(one.worktree).toBe(fixture.worktrees['acme__widgets-1']);
    expect(one.instance).toEqual({
      instanceId: 'acme__widgets-1',
      repo: 'acme/widgets',
      problemStatement: fixture.instances[0]!.problem_statement,
    });
    expect(one.targets).toEqual({
      targetFiles: ['widgets/gears.py', CATM_FILE],
      patchFiles: ['widgets/gears.py'],
      goldLineRanges: fixture.truths['acme__widgets-1']!.lineRanges,
      modules: ['widgets/gears.py:Gear'],
      functions: ['widgets/gears.py:Gear.circumference', 'widgets/gears.py:mesh'],
    });
  });

  it('drops files the gold patch creates from every target set', async () => {
    const mixed = (await loadEnvSamples(fixture.samples.uri, 'codescout')).samples.get('acme__widgets-mixed')!;
    expect(mixed.targets).toEqual({
      targetFiles: ['widgets/gears.py'],
      patchFiles: ['widgets/gears.py'],
      goldLineRanges: [{ path: 'widgets/gears.py', start: 9, end: 15 }],
      modules: ['widgets/gears.py:Gear'],
      functions: ['widgets/gears.py:mesh'],
    });
  });

  it('says why each other row cannot be trained on, and keeps the first of a repeated instance', async () => {
    const loaded = await loadEnvSamples(fixture.samples.uri, 'v3');
    expect(loaded.skipped).toEqual([
      { instanceId: 'acme__widgets-broken', reason: 'no ground truth: gold patch: no file headers' },
      { instanceId: 'acme__widgets-noworktree', reason: 'no ground truth: no worktree for this commit' },
      {
        instanceId: 'acme__widgets-gone',
        reason: `worktree ${path.join(fixture.worktrees['acme__widgets-1']!, 'not-there')} is not a directory`,
      },
      { instanceId: 'acme__widgets-created', reason: 'every gold file is created by the patch: nothing to find' },
      { instanceId: 'acme__widgets-1', reason: 'duplicate instance id (the first row is used)' },
    ]);
  });

  it('names the bad field of a row that is not an environment sample', () => {
    const row = { ...fixture.rows[0]!, baseCommit: 'not-a-sha' };
    expect(envSampleFromRow(row, 'v1')).toEqual({
      ok: false,
      skipped: { instanceId: 'acme__widgets-1', reason: expect.stringMatching(/^not an environment sample row: baseCommit: /) },
    });
    const noTruth = { ...fixture.rows[0]! };
    delete noTruth.gold_modules;
    expect(envSampleFromRow(noTruth, 'v1')).toEqual({
      ok: false,
      skipped: { instanceId: 'acme__widgets-1', reason: 'ground-truth row is missing column gold_modules' },
    });
  });
});

import { describe, expect, it } from 'vitest';
import { levelScores } from '../metrics/levels';
import { parseInstanceRecord } from '../../schemas/instances';
import { targetsFromFileChanges } from './codescout-layout';
import { groundTruthForPatch } from './ground-truth';

// A real-shaped module: a class with a method, and a top-level function with a nested helper.
const GEARS = [
  'import math', // 1
  '', // 2
  'class Gear:', // 3
  '    def circumference(self, module):', // 4
  '        return math.pi * module', // 5
  '', // 6
  '', // 7
  'def mesh(a, b):', // 8
  '    def ratio(x, y):', // 9
  '        return x / y', // 10
  '    return ratio(a, b)', // 11
  '',
].join('\n');

const PATCH = [
  'diff --git a/widgets/gears.py b/widgets/gears.py',
  '--- a/widgets/gears.py',
  '+++ b/widgets/gears.py',
  '@@ -4,2 +4,2 @@ class Gear:',
  '     def circumference(self, module):',
  '-        return math.pi * module',
  '+        return 2 * math.pi * module',
  '@@ -9,2 +9,2 @@ def mesh(a, b):',
  '     def ratio(x, y):',
  '-        return x / y',
  '+        return x / y if y else 0.0',
  '',
].join('\n');

// The same instance in CodeScout's layout, with LocAgent's module convention (a top-level function is a
// module too) and an added entity that is no target.
const CODESCOUT_ROW = {
  instance_id: 'acme__widgets-1',
  repo: 'acme/widgets',
  base_commit: 'a'.repeat(40),
  problem_statement: 'Gear.circumference is wrong and mesh() divides by zero.',
  patch: PATCH,
  file_changes: [
    {
      file: 'widgets/gears.py',
      changes: {
        edited_entities: ['widgets/gears.py:Gear.circumference', 'widgets/gears.py:mesh'],
        edited_modules: ['widgets/gears.py:Gear', 'widgets/gears.py:mesh'],
        added_entities: ['widgets/gears.py:Gear.size'],
        added_modules: ['widgets/gears.py:Belt'],
      },
    },
  ],
};

describe("CodeScout's instance layout as an instances input", () => {
  it('parses file_changes and keeps only edited_* as targets; added_* are ignored', () => {
    const parsed = parseInstanceRecord({ ordinal: 1, row: CODESCOUT_ROW });
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    const targets = targetsFromFileChanges(parsed.instance.file_changes!);
    expect(targets).toEqual({
      files: ['widgets/gears.py'],
      modules: ['widgets/gears.py:Gear'],
      functions: ['widgets/gears.py:Gear.circumference', 'widgets/gears.py:mesh'],
      topLevelFunctionModules: ['widgets/gears.py:mesh'],
    });
    expect(JSON.stringify(targets)).not.toMatch(/Gear\.size|Belt/);
  });

  it('reads SWE-bench rows (no file_changes) as before and names a malformed file_changes column', () => {
    const { file_changes: _dropped, ...swebench } = CODESCOUT_ROW;
    const plain = parseInstanceRecord({ ordinal: 2, row: swebench });
    expect(plain.ok && plain.instance.file_changes).toBeFalsy();
    const bad = parseInstanceRecord({ ordinal: 3, row: { ...CODESCOUT_ROW, file_changes: [{ changes: {} }] } });
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.message).toMatch(/row 3: column file_changes/);
  });
});

describe('module and function levels: ours, CodeScout’s and LocAgent’s', () => {
  it('ours (tree-sitter on the gold patch) agree with CodeScout’s edited_* once LocAgent’s top-level-function modules are set aside', async () => {
    const ours = await groundTruthForPatch(PATCH, async (file) => (file === 'widgets/gears.py' ? GEARS : null));
    // Modules are classes only; a nested function counts as its enclosing top-level function.
    expect(ours.modules).toEqual(['widgets/gears.py:Gear']);
    expect(ours.functions).toEqual(['widgets/gears.py:Gear.circumference', 'widgets/gears.py:mesh']);
    const codescout = targetsFromFileChanges(CODESCOUT_ROW.file_changes);
    expect(codescout.modules).toEqual(ours.modules);
    expect(codescout.functions).toEqual(ours.functions);
  });

  it('scores a LocAgent-style module list (top-level functions as modules) below 1 against our classes-only modules', () => {
    const gold = {
      files: ['widgets/gears.py'],
      modules: ['widgets/gears.py:Gear'],
      functions: ['widgets/gears.py:Gear.circumference', 'widgets/gears.py:mesh'],
    };
    const locagentStyle = { ...gold, modules: ['widgets/gears.py:Gear', 'widgets/gears.py:mesh'] };
    const scores = levelScores(locagentStyle, gold);
    expect(scores.module.precision).toBe(0.5);
    expect(scores.module.recall).toBe(1);
    expect(scores.module.f1).toBeCloseTo(2 / 3, 12);
    expect(scores.function.f1).toBe(1);
  });
});

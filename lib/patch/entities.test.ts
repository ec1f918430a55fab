import { describe, expect, it } from 'vitest';
import { applyFilePatch } from './apply-hunks';
import { entitiesAtLines, entitiesTouchedByFilePatch } from './entities';
import { parseUnifiedDiff } from './parse-diff';
import { pythonDefinitions } from './python-definitions';

/** Line n of SOURCE is SOURCE_LINES[n - 1]; the comments name the line numbers the tests use. */
const SOURCE_LINES = [
  '"""Module docstring."""', // 1
  'import os', // 2
  'from typing import TYPE_CHECKING', // 3
  '', // 4
  'LIMIT = 10', // 5
  '', // 6
  '', // 7
  '@cache', // 8
  '@trace(level=2)', // 9
  'def top(x):', // 10
  '    """Top docstring."""', // 11
  '    def helper(y):', // 12
  '        def deeper():', // 13
  '            return y', // 14
  '        return deeper()', // 15
  '    return helper(x)', // 16
  '', // 17
  '', // 18
  'async def fetch(url):', // 19
  '    return await get(url)', // 20
  '', // 21
  '', // 22
  'class Model(Base):', // 23
  '    """Model docstring', // 24
  '    spanning lines."""', // 25
  '', // 26
  '    table = "models"', // 27
  '', // 28
  '    def save(self):', // 29
  '        return self.table', // 30
  '', // 31
  '    @property', // 32
  '    def name(self):', // 33
  '        return "m"', // 34
  '', // 35
  '    async def load(self):', // 36
  '        class Local:', // 37
  '            def inner(self):', // 38
  '                return 1', // 39
  '        return Local()', // 40
  '', // 41
  '    class Meta:', // 42
  '        ordering = ["id"]', // 43
  '', // 44
  '        def describe(self):', // 45
  '            return "meta"', // 46
  '', // 47
  '', // 48
  'if TYPE_CHECKING:', // 49
  '    def typed(): ...', // 50
  'else:', // 51
  '    try:', // 52
  '        def typed():', // 53
  '            return None', // 54
  '    except ImportError:', // 55
  '        pass', // 56
  'main()', // 57
];
const SOURCE = SOURCE_LINES.join('\n') + '\n';

describe('pythonDefinitions (tree-sitter)', () => {
  it('finds every class and function with qualified names, decorator-inclusive spans, docstrings, async flags', async () => {
    const defs = await pythonDefinitions(SOURCE);
    expect(defs.map((d) => [d.kind, d.qualifiedName, d.startLine, d.endLine, d.docstring, d.isAsync])).toEqual([
      ['function', 'top', 8, 16, [11, 11], false],
      ['function', 'top.helper', 12, 15, null, false],
      ['function', 'top.helper.deeper', 13, 14, null, false],
      ['function', 'fetch', 19, 20, null, true],
      ['class', 'Model', 23, 46, [24, 25], false],
      ['function', 'Model.save', 29, 30, null, false],
      ['function', 'Model.name', 32, 34, null, false],
      ['function', 'Model.load', 36, 40, null, true],
      ['class', 'Model.load.Local', 37, 39, null, false],
      ['function', 'Model.load.Local.inner', 38, 39, null, false],
      ['class', 'Model.Meta', 42, 46, null, false],
      ['function', 'Model.Meta.describe', 45, 46, null, false],
      ['function', 'typed', 50, 50, null, false],
      ['function', 'typed', 53, 54, null, false],
    ]);
    expect(defs[1]!.parent).toBe(0);
    expect(defs[9]!.parent).toBe(8);
  });

  it('reads CRLF sources and survives syntax errors', async () => {
    const crlf = await pythonDefinitions('class A:\r\n    def f(self):\r\n        pass\r\n');
    expect(crlf.map((d) => [d.qualifiedName, d.startLine, d.endLine])).toEqual([
      ['A', 1, 3],
      ['A.f', 2, 3],
    ]);
    const broken = await pythonDefinitions('def ok():\n    return 1\n\ndef broken(:\n    pass\n');
    expect(broken.map((d) => d.qualifiedName)).toContain('ok');
  });
});

describe('entitiesAtLines: CodeScout §3.1 attribution on a pre-image', () => {
  const at = (...ranges: [number, number][]) => entitiesAtLines('pkg/m.py', SOURCE, ranges);

  it('module-level imports, constants, statements and the module docstring touch no entity', async () => {
    expect(await at([1, 7], [57, 57])).toEqual({ modules: [], functions: [] });
  });

  it('a decorator line belongs to the function it decorates', async () => {
    expect(await at([8, 8])).toEqual({ modules: [], functions: ['pkg/m.py:top'] });
    expect(await at([32, 32])).toEqual({ modules: ['pkg/m.py:Model'], functions: ['pkg/m.py:Model.name'] });
  });

  it('nested functions are attributed to the outermost enclosing function', async () => {
    expect(await at([14, 14])).toEqual({ modules: [], functions: ['pkg/m.py:top'] });
    expect(await at([12, 12])).toEqual({ modules: [], functions: ['pkg/m.py:top'] });
  });

  it('a class defined inside a method is part of that method', async () => {
    expect(await at([39, 39])).toEqual({ modules: ['pkg/m.py:Model'], functions: ['pkg/m.py:Model.load'] });
  });

  it('async defs are functions', async () => {
    expect(await at([20, 20])).toEqual({ modules: [], functions: ['pkg/m.py:fetch'] });
    expect(await at([36, 36])).toEqual({ modules: ['pkg/m.py:Model'], functions: ['pkg/m.py:Model.load'] });
  });

  it('class attributes and class headers touch the class only', async () => {
    expect(await at([27, 27])).toEqual({ modules: ['pkg/m.py:Model'], functions: [] });
    expect(await at([23, 23])).toEqual({ modules: ['pkg/m.py:Model'], functions: [] });
    expect(await at([43, 43])).toEqual({ modules: ['pkg/m.py:Model.Meta'], functions: [] });
  });

  it('nested classes are named Outer.Inner, their methods Outer.Inner.method', async () => {
    expect(await at([46, 46])).toEqual({ modules: ['pkg/m.py:Model.Meta'], functions: ['pkg/m.py:Model.Meta.describe'] });
  });

  it('docstring lines and blank lines touch nothing', async () => {
    expect(await at([11, 11], [24, 26], [28, 28], [31, 31])).toEqual({ modules: [], functions: [] });
  });

  it('definitions inside if/try blocks keep their module-level names', async () => {
    expect(await at([50, 50], [54, 54])).toEqual({ modules: [], functions: ['pkg/m.py:typed'] });
  });

  it('a range spanning several definitions touches each of them once, in order', async () => {
    expect(await at([30, 34], [29, 29])).toEqual({
      modules: ['pkg/m.py:Model'],
      functions: ['pkg/m.py:Model.save', 'pkg/m.py:Model.name'],
    });
  });

  it('rejects a bad range naming the file', async () => {
    await expect(at([5, 3])).rejects.toThrow('pkg/m.py: bad line range [5, 3]');
    await expect(at([0, 3])).rejects.toThrow(/bad line range \[0, 3\]/);
  });
});

/** A one-file patch against SOURCE; `body` is the hunk list. */
const patchOf = (...hunkLines: string[]) =>
  parseUnifiedDiff(['diff --git a/pkg/m.py b/pkg/m.py', '--- a/pkg/m.py', '+++ b/pkg/m.py', ...hunkLines].join('\n'))[0]!;

describe('entitiesTouchedByFilePatch: removed lines in the pre-image, added lines in the post-image', () => {
  const touched = (...hunkLines: string[]) => entitiesTouchedByFilePatch(SOURCE, patchOf(...hunkLines));

  it('a new method touches its class but no function (CodeScout §3.1 i)', async () => {
    expect(
      await touched('@@ -30,2 +30,5 @@', '         return self.table', ' ', '+    def reset(self):', '+        self.table = None', '+'),
    ).toEqual({ modules: ['pkg/m.py:Model'], functions: [] });
  });

  it('a new class attribute touches the class only', async () => {
    expect(await touched('@@ -27,0 +28 @@', '+    verbose = True')).toEqual({ modules: ['pkg/m.py:Model'], functions: [] });
  });

  it('new imports, globals and top-level functions touch only the file (CodeScout §3.1 ii)', async () => {
    expect(
      await touched(
        '@@ -2,0 +3 @@',
        '+import sys',
        '@@ -5 +6 @@',
        '-LIMIT = 10',
        '+LIMIT = 20',
        '@@ -21,0 +23,3 @@',
        '+def added():',
        '+    return 1',
        '+',
      ),
    ).toEqual({ modules: [], functions: [] });
  });

  it('a docstring-only edit touches nothing (CodeScout §3.1 iii)', async () => {
    expect(
      await touched(
        '@@ -24,2 +24,2 @@',
        '-    """Model docstring',
        '-    spanning lines."""',
        '+    """Model docstring',
        '+    over two lines."""',
      ),
    ).toEqual({
      modules: [],
      functions: [],
    });
  });

  it('a line appended after the last line of a function body belongs to that function', async () => {
    // Inserted after line 30, which ends Model.save: only the post-image shows it is inside save.
    expect(await touched('@@ -30,0 +31 @@', '+        self.flush()')).toEqual({
      modules: ['pkg/m.py:Model'],
      functions: ['pkg/m.py:Model.save'],
    });
  });

  it('an unindented line inserted right after a function is module-level, not part of the function', async () => {
    expect(await touched('@@ -16,0 +17 @@', '+register(top)')).toEqual({ modules: [], functions: [] });
  });

  it('adding a decorator touches the decorated method', async () => {
    expect(await touched('@@ -28,0 +29 @@', '+    @transaction')).toEqual({
      modules: ['pkg/m.py:Model'],
      functions: ['pkg/m.py:Model.save'],
    });
  });

  it('a new nested function inside an existing function touches the existing function', async () => {
    expect(await touched('@@ -15,0 +16,2 @@', '+        def extra():', '+            return 2')).toEqual({
      modules: [],
      functions: ['pkg/m.py:top'],
    });
  });

  it('renaming a method touches the old method (pre-image) and its class', async () => {
    expect(await touched('@@ -29 +29 @@', '-    def save(self):', '+    def store(self):')).toEqual({
      modules: ['pkg/m.py:Model'],
      functions: ['pkg/m.py:Model.save'],
    });
  });

  it('deleting a whole method touches that method', async () => {
    expect(await touched('@@ -28,3 +27,0 @@', '-', '-    def save(self):', '-        return self.table')).toEqual({
      modules: ['pkg/m.py:Model'],
      functions: ['pkg/m.py:Model.save'],
    });
  });

  it('an async method edited inside its nested class is the async method', async () => {
    expect(await touched('@@ -39 +39 @@', '-                return 1', '+                return 2')).toEqual({
      modules: ['pkg/m.py:Model'],
      functions: ['pkg/m.py:Model.load'],
    });
  });

  it('fails loudly when the patch does not match the pre-image', async () => {
    await expect(touched('@@ -29 +29 @@', '-    def nope(self):', '+    def yes(self):')).rejects.toThrow(
      /pkg\/m.py: pre-image line 29 is "    def save\(self\):" but the patch expects "    def nope\(self\):"/,
    );
  });
});

describe('applyFilePatch', () => {
  it('reproduces the post-image, keeping CRLF lines and the final-newline state', () => {
    const pre = 'a\r\nb\r\nc\r\n';
    const file = parseUnifiedDiff('--- a/x\n+++ b/x\n@@ -2 +2,2 @@\n-b\n+B\n+B2\n')[0]!;
    expect(applyFilePatch(pre, file)).toBe('a\r\nB\nB2\nc\r\n');
    const noEol = parseUnifiedDiff('--- a/y\n+++ b/y\n@@ -1 +1 @@\n-z\n+Z\n\\ No newline at end of file\n')[0]!;
    expect(applyFilePatch('z\n', noEol)).toBe('Z');
  });
});

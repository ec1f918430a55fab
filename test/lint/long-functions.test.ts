import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { longFunctions, longFunctionsIn, longPythonFunctionsIn, productFiles, pythonProductFiles } from './long-functions';

const body = (n: number) => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`).join('\n');

describe('longFunctionsIn', () => {
  it('counts a function from its first to its last line and reports only those over the limit', () => {
    const text = [`export function short() {\n${body(3)}\n}`, `export async function long(a: number) {\n${body(9)}\n}`].join('\n');
    // `long` spans its header, 9 body lines and the closing brace: 11 lines, starting on line 6.
    expect(longFunctionsIn('lib/x.ts', text, 10)).toEqual([{ file: 'lib/x.ts', line: 6, lines: 11, name: 'long' }]);
    expect(longFunctionsIn('lib/x.ts', text, 11)).toEqual([]);
  });

  it('names arrow functions by their variable, methods by their name, and counts a nested function on its own too', () => {
    const text = [
      `const handler = async () => {\n${body(4)}\n  const inner = () => {\n${body(6)}\n  };\n};`,
      `class Store {\n  open(): void {\n${body(6)}\n  }\n}`,
      `items.forEach((item) => {\n${body(6)}\n});`,
    ].join('\n');
    const names = longFunctionsIn('lib/x.ts', text, 6).map((fn) => `${fn.name}:${fn.lines}`);
    expect(names).toEqual(['handler:14', 'inner:8', 'open:8', '<callback of items.forEach>:8']);
  });
});

describe('productFiles', () => {
  it('lists product TypeScript files of the checkout, without tests', () => {
    const files = productFiles(path.resolve(import.meta.dirname, '../..'));
    expect(files).toContain('lib/labels/judge-run.ts');
    expect(files).toContain('workflows/pipeline.ts');
    expect(files.some((file) => file.endsWith('.test.ts'))).toBe(false);
    expect(files.some((file) => file.startsWith('test/') || file.startsWith('bench/'))).toBe(false);
  });
});

describe('longPythonFunctionsIn', () => {
  it("counts a def from its first to its last line with Python's parser, a docstring and a nested def included", () => {
    const pyBody = (n: number) => Array.from({ length: n }, (_, i) => `    v${i} = ${i}`).join('\n');
    const text = `def short():\n${pyBody(2)}\n\n\ndef long(a):\n    """Doc.\n\n    more\n    """\n${pyBody(6)}\n    def inner():\n        return a\n    return inner\n`;
    // `long` starts on line 6: header, a 4-line docstring, 6 body lines, a 2-line inner def and the return: 14 lines.
    expect(longPythonFunctionsIn([['trainer/x.py', text]], 10)).toEqual([{ file: 'trainer/x.py', line: 6, lines: 14, name: 'long' }]);
    expect(longPythonFunctionsIn([['trainer/x.py', text]], 14)).toEqual([]);
  });

  it("lists the trainer's Python without its tests", () => {
    const files = pythonProductFiles(path.resolve(import.meta.dirname, '../..'));
    expect(files).toContain('trainer/train.py');
    expect(files.some((file) => file.startsWith('trainer/tests/'))).toBe(false);
  });
});

describe('the product code', () => {
  // The rule of ARCHITECTURE.md: a function that needs more than about 80 lines mixes jobs; split it along them.
  it('has no function over 80 lines (TypeScript and the trainer)', () => {
    const found = longFunctions(path.resolve(import.meta.dirname, '../..')).map(
      (fn) => `${fn.file}:${fn.line} ${fn.name} (${fn.lines} lines)`,
    );
    expect(found).toEqual([]);
  });
});

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/**
 * Lists the functions of product code longer than a limit (default 80 lines). TypeScript through its own parser:
 * declarations, methods, constructors, accessors, function expressions and arrow functions, each counted
 * from its first to its last line (a nested function counts inside its parent too, and on its own). The Python
 * trainer (its tests aside) through Python's `ast`, a `def` from its first to its last line.
 *
 *   npx tsx test/lint/long-functions.ts [maxLines]      # prints `lines  file:line  name`, longest first
 *
 * A lint rule (ARCHITECTURE.md, "Rules"): `npm run lint` runs this script, which exits 1 when it lists any
 * function, and `long-functions.test.ts` requires the tree to have none.
 */

/** The folders of product code; tests (`*.test.ts`, test/), benches and scripts are left out. */
export const PRODUCT_FOLDERS = ['lib', 'activities', 'workflows', 'cli', 'workers', 'schemas'] as const;
export const DEFAULT_MAX_FUNCTION_LINES = 80;

export interface LongFunction {
  file: string;
  /** 1-based line of the function's start. */
  line: number;
  lines: number;
  name: string;
}

function nameOf(node: ts.FunctionLikeDeclaration, source: ts.SourceFile): string {
  if (node.name) return node.name.getText(source);
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) {
    return parent.name.getText(source);
  }
  if (ts.isCallExpression(parent)) return `<callback of ${parent.expression.getText(source).slice(0, 40)}>`;
  return '<anonymous>';
}

/** The functions in `text` (a TypeScript file named `file`) longer than `maxLines` lines. */
export function longFunctionsIn(file: string, text: string, maxLines: number = DEFAULT_MAX_FUNCTION_LINES): LongFunction[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: LongFunction[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const fn = node as ts.FunctionLikeDeclaration;
      const first = source.getLineAndCharacterOfPosition(fn.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(fn.getEnd()).line;
      const lines = last - first + 1;
      if (lines > maxLines) found.push({ file, line: first + 1, lines, name: nameOf(fn, source) });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The tracked product files of the checkout at `root` (`git ls-files`), tests left out. */
export function productFiles(root: string): string[] {
  const listed = execFileSync('git', ['ls-files', '--', ...PRODUCT_FOLDERS.map((folder) => `${folder}/*.ts`)], {
    cwd: root,
    encoding: 'utf8',
  });
  return listed
    .split('\n')
    .filter((file) => file !== '' && !file.endsWith('.test.ts') && !file.endsWith('.d.ts'))
    .sort();
}

/** The trainer's Python files of the checkout at `root`, its tests (`trainer/tests/`) left out. */
export function pythonProductFiles(root: string): string[] {
  const listed = execFileSync('git', ['ls-files', '--', 'trainer/*.py'], { cwd: root, encoding: 'utf8' });
  return listed
    .split('\n')
    .filter((file) => file !== '' && !file.startsWith('trainer/tests/'))
    .sort();
}

// Reads `[[file, text], ...]` as JSON on stdin and prints the long defs as JSON: Python's own parser, so a
// docstring or a continuation line never ends a function early.
const PYTHON_LONG_DEFS = `
import ast, json, sys
files, max_lines = json.load(sys.stdin)
found = []
for file, text in files:
    for node in ast.walk(ast.parse(text, file)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > max_lines:
                found.append({"file": file, "line": node.lineno, "lines": lines, "name": node.name})
print(json.dumps(found))
`;

/** The Python functions in `files` (`[name, text]` pairs) longer than `maxLines` lines. */
export function longPythonFunctionsIn(files: Array<[string, string]>, maxLines: number = DEFAULT_MAX_FUNCTION_LINES): LongFunction[] {
  const output = execFileSync('python3', ['-c', PYTHON_LONG_DEFS], { input: JSON.stringify([files, maxLines]), encoding: 'utf8' });
  return JSON.parse(output) as LongFunction[];
}

/** Every long function of the product code at `root` (TypeScript and the trainer's Python), longest first. */
export function longFunctions(root: string, maxLines: number = DEFAULT_MAX_FUNCTION_LINES): LongFunction[] {
  const read = (file: string) => readFileSync(path.join(root, file), 'utf8');
  const python = longPythonFunctionsIn(
    pythonProductFiles(root).map((file): [string, string] => [file, read(file)]),
    maxLines,
  );
  return productFiles(root)
    .flatMap((file) => longFunctionsIn(file, read(file), maxLines))
    .concat(python)
    .sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file) || a.line - b.line);
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  const maxLines = process.argv[2] === undefined ? DEFAULT_MAX_FUNCTION_LINES : Number(process.argv[2]);
  if (!Number.isInteger(maxLines) || maxLines < 1) throw new Error(`maxLines must be an integer ≥ 1, got ${process.argv[2]}`);
  const root = path.resolve(import.meta.dirname, '../..');
  const found = longFunctions(root, maxLines);
  for (const fn of found) console.log(`${String(fn.lines).padStart(4)}  ${fn.file}:${fn.line}  ${fn.name}`);
  console.log(`${found.length} functions over ${maxLines} lines in ${PRODUCT_FOLDERS.join(', ')} and trainer (Python)`);
  if (found.length > 0) process.exitCode = 1;
}

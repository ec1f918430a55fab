/**
 * Which Python classes ("modules") and functions a change touches — CodeScout §3.1, whose ground truth is
 * LocAgent's patch scripts enhanced to (i) count an added method or class attribute at the class and file level,
 * (ii) count edits to imports and module-level variables at the file level only, (iii) ignore docstring edits.
 *
 * Attribution of one changed line, given the definitions enclosing it (outermost first):
 * - inside a function: the OUTERMOST enclosing function, qualified by the classes around it
 *   (`file.py:Class.method`, `file.py:func`, `file.py:Outer.Inner.method`). Functions and classes nested in a
 *   function are attributed to that function: CodeScout's answer format (`localization_finish` with one
 *   class_name and one function_name) cannot name anything deeper.
 *   The module is the innermost class enclosing that function, if any (`file.py:Class`, `file.py:Outer.Inner`).
 * - in a class body outside any function (class attribute, class header, decorator): the innermost class.
 * - at module level (imports, globals, statements): no entity, only the file.
 * - inside the docstring of the innermost enclosing definition: no entity (CodeScout iii).
 * - a blank line: no entity; blank separators carry no code and land wherever the hunk boundary falls.
 * Decorators are part of the definition they decorate; `async def` is a function like any other.
 */
import { applyFilePatch } from './apply-hunks';
import type { FilePatch, LineRange } from './parse-diff';
import { pythonDefinitions, type PythonDefinition } from './python-definitions';

export interface TouchedEntities {
  /** `file.py:Class` / `file.py:Outer.Inner`, in order of first touch. */
  modules: string[];
  /** `file.py:Class.method` / `file.py:func`, in order of first touch. */
  functions: string[];
}

interface Attribution {
  module: string | null;
  function: string | null;
}

/** Definitions enclosing `line`, outermost first. */
function enclosingChain(definitions: PythonDefinition[], line: number): PythonDefinition[] {
  return definitions.filter((d) => d.startLine <= line && line <= d.endLine);
}

function attributeChain(chain: PythonDefinition[], line: number): Attribution {
  const innermost = chain[chain.length - 1];
  if (!innermost) return { module: null, function: null };
  if (innermost.docstring && innermost.docstring[0] <= line && line <= innermost.docstring[1]) {
    return { module: null, function: null };
  }
  const outermostFunction = chain.findIndex((d) => d.kind === 'function');
  if (outermostFunction < 0) return { module: innermost.qualifiedName, function: null };
  const fn = chain[outermostFunction]!;
  const owner = outermostFunction > 0 ? chain[outermostFunction - 1]!.qualifiedName : null;
  return { module: owner, function: fn.qualifiedName };
}

class EntityCollector {
  private readonly modules = new Set<string>();
  private readonly functions = new Set<string>();
  constructor(private readonly path: string) {}
  add(attribution: Attribution): void {
    if (attribution.module) this.modules.add(`${this.path}:${attribution.module}`);
    if (attribution.function) this.functions.add(`${this.path}:${attribution.function}`);
  }
  result(): TouchedEntities {
    return { modules: [...this.modules], functions: [...this.functions] };
  }
}

const isBlank = (text: string | undefined) => text === undefined || text.trim().length === 0;

/**
 * Entities of a Python pre-image touched by the given 1-based inclusive line ranges, named `path:...`.
 * Use it to map any pre-image ranges (gold or predicted) to entities.
 */
export async function entitiesAtLines(path: string, source: string, ranges: LineRange[]): Promise<TouchedEntities> {
  const definitions = await pythonDefinitions(source);
  const lines = source.split('\n');
  const collector = new EntityCollector(path);
  for (const [start, end] of [...ranges].sort((a, b) => a[0] - b[0])) {
    if (!(Number.isInteger(start) && Number.isInteger(end) && start >= 1 && end >= start)) {
      throw new Error(`${path}: bad line range [${start}, ${end}] (1-based, inclusive, start <= end)`);
    }
    for (let line = start; line <= Math.min(end, lines.length); line++) {
      if (isBlank(lines[line - 1])) continue;
      collector.add(attributeChain(enclosingChain(definitions, line), line));
    }
  }
  return collector.result();
}

/**
 * Entities a file patch touches in its pre-image. Removed lines are located in the pre-image. Added lines are
 * located in the post-image (the pre-image with the hunks applied) and mapped back by qualified name: a line
 * added inside an existing function touches that function; a line inside a definition the patch creates
 * touches its nearest enclosing definition that already existed (a new method touches its class only,
 * CodeScout §3.1 (i)); a new top-level definition touches only the file.
 */
export async function entitiesTouchedByFilePatch(preImage: string, file: FilePatch): Promise<TouchedEntities> {
  const collector = new EntityCollector(file.path);
  // Applying first also checks every context and removed line against the pre-image.
  const postImage = applyFilePatch(preImage, file);
  const preDefinitions = await pythonDefinitions(preImage);
  const removed = file.hunks.flatMap((h) => h.lines).filter((l) => l.kind === '-' && !isBlank(l.text));
  for (const line of removed) collector.add(attributeChain(enclosingChain(preDefinitions, line.oldLine!), line.oldLine!));

  const added = file.hunks.flatMap((h) => h.lines).filter((l) => l.kind === '+' && !isBlank(l.text));
  if (added.length > 0) {
    const postDefinitions = await pythonDefinitions(postImage);
    const preByName = new Map<string, PythonDefinition>();
    for (const d of preDefinitions) preByName.set(`${d.kind}:${d.qualifiedName}`, d);
    for (const line of added) {
      const postChain = enclosingChain(postDefinitions, line.newLine!);
      // Keep the prefix of the post-image chain that already existed in the pre-image.
      const existing: PythonDefinition[] = [];
      for (const d of postChain) {
        const pre = preByName.get(`${d.kind}:${d.qualifiedName}`);
        if (!pre) break;
        existing.push(d);
      }
      if (existing.length < postChain.length) {
        // The line belongs to a new definition: it touches the existing ones around it, never their docstrings.
        collector.add(attributeChain(existing, Number.NaN));
      } else {
        collector.add(attributeChain(postChain, line.newLine!));
      }
    }
  }
  return collector.result();
}

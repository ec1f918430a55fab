import { createRequire } from 'node:module';
import { Language, Parser, type Node } from 'web-tree-sitter';

/** A class or function definition in a Python source, with the lines it spans (1-based, inclusive). */
export interface PythonDefinition {
  kind: 'class' | 'function';
  name: string;
  /** Dotted path through every enclosing class and function: `Outer.Inner.method`, `func.helper`. */
  qualifiedName: string;
  /** First line, decorators included: a decorator belongs to the definition it decorates. */
  startLine: number;
  endLine: number;
  /** Lines of the docstring (first statement of the body when it is a bare string), if any. */
  docstring: [start: number, end: number] | null;
  isAsync: boolean;
  /** Index of the enclosing definition in the same list, null at module level. */
  parent: number | null;
}

/** Node types whose children can be statements (hence definitions); expressions are never searched. */
const STATEMENT_CONTAINERS = new Set([
  'module',
  'block',
  'if_statement',
  'elif_clause',
  'else_clause',
  'try_statement',
  'except_clause',
  'except_group_clause',
  'finally_clause',
  'with_statement',
  'for_statement',
  'while_statement',
  'match_statement',
  'case_clause',
]);

let parserPromise: Promise<Parser> | null = null;

/** The tree-sitter Python parser, loaded once per process from the tree-sitter-python package's wasm. */
export function pythonParser(): Promise<Parser> {
  parserPromise ??= (async () => {
    const require = createRequire(import.meta.url);
    await Parser.init();
    const language = await Language.load(require.resolve('tree-sitter-python/tree-sitter-python.wasm'));
    const parser = new Parser();
    parser.setLanguage(language);
    return parser;
  })();
  parserPromise.catch(() => {
    parserPromise = null;
  });
  return parserPromise;
}

/** 1-based last line of a node; a node ending at column 0 ends on the line before. */
function lastLine(node: Node): number {
  const { row, column } = node.endPosition;
  return column === 0 && row > node.startPosition.row ? row : row + 1;
}

function docstringOf(definition: Node): [number, number] | null {
  const body = definition.childForFieldName('body');
  const first = body?.namedChildren.find((c) => c !== null && c.type !== 'comment') ?? null;
  if (first?.type !== 'expression_statement' || first.namedChildCount !== 1) return null;
  const expr = first.namedChild(0);
  if (expr?.type !== 'string' && expr?.type !== 'concatenated_string') return null;
  return [first.startPosition.row + 1, lastLine(first)];
}

/**
 * Every class and function definition in `source`, outer before inner, in source order. Tree-sitter recovers
 * from syntax errors, so a file with an error still yields the definitions it can see.
 */
export async function pythonDefinitions(source: string): Promise<PythonDefinition[]> {
  const parser = await pythonParser();
  const tree = parser.parse(source);
  if (!tree) throw new Error('tree-sitter returned no tree for the Python source');
  const definitions: PythonDefinition[] = [];
  try {
    const visit = (node: Node, parent: number | null, prefix: string, span: Node) => {
      if (node.type === 'decorated_definition') {
        const inner = node.childForFieldName('definition');
        if (inner) visit(inner, parent, prefix, node);
        return;
      }
      if (node.type === 'class_definition' || node.type === 'function_definition') {
        const name = node.childForFieldName('name')?.text ?? '';
        const qualifiedName = prefix ? `${prefix}.${name}` : name;
        definitions.push({
          kind: node.type === 'class_definition' ? 'class' : 'function',
          name,
          qualifiedName,
          startLine: span.startPosition.row + 1,
          endLine: lastLine(span),
          docstring: docstringOf(node),
          isAsync: node.type === 'function_definition' && node.children.some((c) => c?.type === 'async'),
          parent,
        });
        const index = definitions.length - 1;
        const body = node.childForFieldName('body');
        for (const child of body?.namedChildren ?? []) if (child) visit(child, index, qualifiedName, child);
        return;
      }
      // Definitions nested in if/try/with/for blocks at any level still belong to the enclosing scope.
      if (!STATEMENT_CONTAINERS.has(node.type)) return;
      for (const child of node.namedChildren) if (child) visit(child, parent, prefix, child);
    };
    visit(tree.rootNode, null, '', tree.rootNode);
  } finally {
    tree.delete();
  }
  return definitions;
}

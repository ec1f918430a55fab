import { z } from 'zod';

/**
 * The agent's sandboxed tools (docs/design.md "Tools"; CodeGrep §3.2 / App. A.1; CodeScout §3.2 narrowed): the
 * argument schemas the sandbox validates, the JSON tool definitions the model sees (OpenAI function-tool
 * format) and the structured result every call returns. Pure zod: safe to import from workflow code. The
 * dispatcher that runs them is lib/sandbox/run-tool.ts.
 */

const noNul = (value: string) => !value.includes('\0');
const NUL_MESSAGE = 'must not contain a NUL byte';
/** Longest command, pattern or path accepted (mirrors SANDBOX_LIMITS.maxCommandChars / maxPathChars). */
const MAX_ARG_CHARS = 4096;
const MAX_LINE_NUMBER = 100_000_000;

const lineNumber = z.number().int().min(1).max(MAX_LINE_NUMBER);
/** A non-empty argument (pattern, glob, path, command line): at most MAX_ARG_CHARS characters, no NUL. */
const argText = () => z.string().min(1).max(MAX_ARG_CHARS).refine(noNul, NUL_MESSAGE);

export const GrepArgsSchema = z
  .object({
    pattern: argText()
      .refine((p) => !/[\r\n]/.test(p), 'must be a single line (no newline)')
      .describe('Regular expression to search for (ripgrep / Rust regex syntax), e.g. "def get_\\w+" or "class Foo\\b".'),
    path: z
      .string()
      .max(MAX_ARG_CHARS)
      .refine(noNul, NUL_MESSAGE)
      .optional()
      .describe('File or directory to search, relative to the repository root. Default: the whole repository.'),
    glob: argText().optional().describe('Only search files matching this glob, e.g. "*.py" (any depth) or "src/**/*.ts" (from the root).'),
  })
  .strict();

export const GlobArgsSchema = z
  .object({
    pattern: argText().describe('Path glob relative to the repository root, e.g. "**/test_*.py", "src/**/*.ts" or "*.cfg" (any depth).'),
  })
  .strict();

export const ReadArgsSchema = z
  .object({
    path: argText().describe('File to read, relative to the repository root.'),
    start_line: lineNumber.optional().describe('First line to show (1-based). Default: 1.'),
    end_line: lineNumber.optional().describe('Last line to show (1-based, inclusive). At most 200 lines are shown per call.'),
  })
  .strict()
  .refine((a) => a.start_line === undefined || a.end_line === undefined || a.end_line >= a.start_line, {
    message: 'end_line must be greater than or equal to start_line',
    path: ['end_line'],
  });

export const TerminalArgsSchema = z
  .object({
    command: argText().describe(
      "A read-only command line run in the repository root: rg, grep, sed -n 'N,Mp', cat, head, tail, find, ls, wc, joined with '|'.",
    ),
  })
  .strict();

export type GrepArgs = z.infer<typeof GrepArgsSchema>;
export type GlobArgs = z.infer<typeof GlobArgsSchema>;
export type ReadArgs = z.infer<typeof ReadArgsSchema>;
export type TerminalArgs = z.infer<typeof TerminalArgsSchema>;

export const ToolNameSchema = z.enum(['grep', 'glob', 'read', 'terminal']);
export type ToolName = z.infer<typeof ToolNameSchema>;

export const TOOL_ARGS_SCHEMAS = {
  grep: GrepArgsSchema,
  glob: GlobArgsSchema,
  read: ReadArgsSchema,
  terminal: TerminalArgsSchema,
} as const satisfies Record<ToolName, z.ZodType>;

/**
 * What every tool call returns. An error is an observation for the model, never an exception that ends the
 * rollout. `truncated` means the output was cut (the output ends with a marker saying what was cut and how
 * to see more); `message` repeats that marker, or explains the error.
 */
export const ToolResultSchema = z.object({
  status: z.enum(['ok', 'truncated', 'error']),
  output: z.string(),
  message: z.string().optional(),
});
export type ToolResult = z.infer<typeof ToolResultSchema>;

const TOOL_DESCRIPTIONS: Record<ToolName, string> = {
  grep:
    'Search file contents in the repository with a regular expression (ripgrep). Returns matching lines as ' +
    '"path:line:text" with paths relative to the repository root, sorted by path; at most 50 matches and ' +
    '4096 characters are shown. Binary files are skipped.',
  glob:
    'List repository files whose path matches a glob (gitignore-style: a pattern without "/" matches at any ' +
    'depth). Returns paths relative to the repository root, sorted; at most 4096 characters are shown.',
  read:
    'Read a text file of the repository with line numbers, optionally only a line range. At most 200 lines ' +
    'and 4096 characters are shown per call; the output says how to continue.',
  terminal:
    'Run a read-only command line in the repository root. Allowed programs: rg, grep, sed -n (only ' +
    "'Np' / 'N,Mp' scripts), cat, head, tail, find (no -exec/-delete), ls, wc, joined with '|'. No ';', " +
    "'&&', redirections, variables or command substitution. Output is cut to 4096 characters.",
};

/** An OpenAI Chat Completions function tool. */
export interface FunctionToolDefinition {
  type: 'function';
  function: { name: ToolName; description: string; parameters: Record<string, unknown> };
}

function parametersOf(name: ToolName): Record<string, unknown> {
  const { $schema: _ignored, ...parameters } = z.toJSONSchema(TOOL_ARGS_SCHEMAS[name], { io: 'input' }) as Record<string, unknown>;
  return parameters;
}

/** The JSON tool definitions the model sees, in the order asked for. */
export function toolDefinitions(names: readonly ToolName[]): FunctionToolDefinition[] {
  return names.map((name) => ({
    type: 'function',
    function: { name, description: TOOL_DESCRIPTIONS[name], parameters: parametersOf(name) },
  }));
}

/** CodeGrep's three read-only primitives (§3.2). */
export const CODEGREP_TOOL_NAMES = ['grep', 'glob', 'read'] as const satisfies readonly ToolName[];
/** CodeScout's single terminal tool (§3.2), narrowed to read-only search programs (§6.2). */
export const TERMINAL_TOOL_NAMES = ['terminal'] as const satisfies readonly ToolName[];

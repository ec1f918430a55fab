/**
 * Command templates for outside programs (OpenHands, the SWE-bench harness, a custom test runner): a
 * command line with `{placeholder}`s, e.g.
 *
 *     python -m evaluation.run --instance {instance_id} --prompt-file {prompt_file} --out "{output_dir}"
 *
 * The template is split into arguments FIRST (whitespace separates; '…' and "…" quote; a backslash escapes
 * the next character outside single quotes), and only then are placeholders replaced inside each argument.
 * A substituted value therefore always stays inside the argument it was written in: spaces, `;`, quotes or
 * `$(…)` in a value never become extra arguments or shell code (there is no shell). `{{` and `}}` are
 * literal braces. A template may also be given as an argument array, which is used as is.
 */
export type CommandTemplate = string | readonly string[];

export class CommandTemplateError extends Error {
  override readonly name = 'CommandTemplateError';
}

/** Splits a command line into arguments (no expansion of any kind). */
export function splitCommandLine(line: string): string[] {
  const args: string[] = [];
  let current = '';
  let inArg = false;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (quote === "'") {
      if (ch === "'") quote = null;
      else current += ch;
      continue;
    }
    if (quote === '"') {
      if (ch === '"') quote = null;
      else if (ch === '\\' && (line[i + 1] === '"' || line[i + 1] === '\\')) current += line[++i];
      else current += ch;
      continue;
    }
    if (ch === "'" || ch === '"') {
      quote = ch;
      inArg = true;
    } else if (ch === '\\') {
      if (i + 1 >= line.length) throw new CommandTemplateError(`command template ends with a lone backslash: ${JSON.stringify(line)}`);
      current += line[++i];
      inArg = true;
    } else if (/\s/.test(ch)) {
      if (inArg) args.push(current);
      current = '';
      inArg = false;
    } else {
      current += ch;
      inArg = true;
    }
  }
  if (quote) throw new CommandTemplateError(`command template has an unclosed ${quote} quote: ${JSON.stringify(line)}`);
  if (inArg) args.push(current);
  return args;
}

type Piece = { literal: string } | { placeholder: string };

function parseArgument(arg: string, allowed: ReadonlySet<string>, template: string): Piece[] {
  const pieces: Piece[] = [];
  let literal = '';
  for (let i = 0; i < arg.length; i++) {
    const ch = arg[i]!;
    if (ch === '{' && arg[i + 1] === '{') {
      literal += '{';
      i++;
    } else if (ch === '}' && arg[i + 1] === '}') {
      literal += '}';
      i++;
    } else if (ch === '{') {
      const end = arg.indexOf('}', i);
      if (end === -1)
        throw new CommandTemplateError(
          `command template ${JSON.stringify(template)}: "{" without "}" in argument ${JSON.stringify(arg)} (write {{ for a literal brace)`,
        );
      const name = arg.slice(i + 1, end);
      if (!allowed.has(name)) {
        throw new CommandTemplateError(
          `command template ${JSON.stringify(template)}: unknown placeholder {${name}}; known: ${[...allowed].map((p) => `{${p}}`).join(', ')}`,
        );
      }
      if (literal) pieces.push({ literal });
      literal = '';
      pieces.push({ placeholder: name });
      i = end;
    } else if (ch === '}') {
      throw new CommandTemplateError(
        `command template ${JSON.stringify(template)}: "}" without "{" in argument ${JSON.stringify(arg)} (write }} for a literal brace)`,
      );
    } else {
      literal += ch;
    }
  }
  if (literal || pieces.length === 0) pieces.push({ literal });
  return pieces;
}

/** A template checked once (at configuration time) and rendered per run. */
export interface CompiledCommand {
  readonly template: string;
  readonly placeholders: ReadonlySet<string>;
  render(values: Readonly<Record<string, string>>): string[];
}

export function compileCommand(template: CommandTemplate, allowedPlaceholders: readonly string[]): CompiledCommand {
  const allowed = new Set(allowedPlaceholders);
  const shown = typeof template === 'string' ? template : JSON.stringify(template);
  const words = typeof template === 'string' ? splitCommandLine(template) : [...template];
  if (words.length === 0 || words.some((w) => typeof w !== 'string')) {
    throw new CommandTemplateError(`command template ${shown} is empty or not a list of strings`);
  }
  const parsed = words.map((w) => parseArgument(w, allowed, shown));
  const used = new Set(parsed.flat().flatMap((p) => ('placeholder' in p ? [p.placeholder] : [])));
  return {
    template: shown,
    placeholders: used,
    render(values) {
      return parsed.map((pieces) =>
        pieces
          .map((p) => {
            if ('literal' in p) return p.literal;
            const value = values[p.placeholder];
            if (value === undefined) throw new CommandTemplateError(`command template ${shown}: no value for {${p.placeholder}}`);
            return value;
          })
          .join(''),
      );
    },
  };
}

/**
 * A GNU-getopt-like parser over an explicit allowlist, for the restricted terminal: short clusters ('-in',
 * '-A3'), '--long', '--long=value', '--long value', '--' and options after operands (GNU permutation). A flag
 * that is not on the list is refused; a flag on the deny list is refused with the reason. Abbreviated long
 * options are not accepted. Parsed options are re-emitted in one canonical form, so the program only ever
 * sees arguments this module produced.
 */
export type ValueRule =
  | { kind: 'none' }
  | { kind: 'number' }
  | { kind: 'signed-number' }
  | { kind: 'text' }
  | { kind: 'choice'; choices: readonly string[] }
  | { kind: 'match'; regex: RegExp; describe: string };

export interface FlagSpec {
  short?: string;
  long?: string;
  value: ValueRule;
  /** Value-taking long flags whose value may only be given with '=' (e.g. grep's --color[=WHEN]). */
  equalsOnly?: boolean;
  /** What this flag's value is, for the caller (e.g. 'pattern' for -e). */
  role?: 'pattern' | 'script';
}

export interface ProgramOptions {
  program: string;
  flags: FlagSpec[];
  /** Flags refused with a reason, by spelling ('-L', '--pre'). */
  denied: Record<string, string>;
}

export interface ParsedOption {
  spec: FlagSpec;
  value?: string;
}

export type ParseResult = { ok: true; options: ParsedOption[]; operands: string[] } | { ok: false; message: string };

const NUMBER = /^\d{1,9}$/;
const SIGNED_NUMBER = /^[+-]?\d{1,9}$/;

export const none: ValueRule = { kind: 'none' };
export const number: ValueRule = { kind: 'number' };
export const signedNumber: ValueRule = { kind: 'signed-number' };
export const text: ValueRule = { kind: 'text' };
export const choice = (...choices: string[]): ValueRule => ({ kind: 'choice', choices });
export const matching = (regex: RegExp, describe: string): ValueRule => ({ kind: 'match', regex, describe });

function spelling(spec: FlagSpec): string {
  return [spec.short ? `-${spec.short}` : null, spec.long ? `--${spec.long}` : null].filter(Boolean).join('/');
}

export function describeAllowed(options: ProgramOptions): string {
  return options.flags.map(spelling).join(' ');
}

function checkValue(program: string, spec: FlagSpec, value: string): string | null {
  const name = spelling(spec);
  const rule = spec.value;
  switch (rule.kind) {
    case 'number':
      return NUMBER.test(value) ? null : `${program} ${name} needs a non-negative number, got ${JSON.stringify(value)}`;
    case 'signed-number':
      return SIGNED_NUMBER.test(value) ? null : `${program} ${name} needs a number, got ${JSON.stringify(value)}`;
    case 'choice':
      return rule.choices.includes(value)
        ? null
        : `${program} ${name} must be one of ${rule.choices.join(', ')}, got ${JSON.stringify(value)}`;
    case 'match':
      return rule.regex.test(value) ? null : `${program} ${name} needs ${rule.describe}, got ${JSON.stringify(value)}`;
    default:
      return null;
  }
}

export function parseOptions(words: string[], options: ProgramOptions): ParseResult {
  const { program, flags, denied } = options;
  const byShort = new Map(flags.filter((f) => f.short).map((f) => [f.short!, f]));
  const byLong = new Map(flags.filter((f) => f.long).map((f) => [f.long!, f]));
  const parsed: ParsedOption[] = [];
  const operands: string[] = [];
  const unknown = (flag: string): ParseResult => {
    const reason = denied[flag];
    return {
      ok: false,
      message: reason
        ? `${program} ${flag} is not allowed: ${reason}`
        : `${program} option ${JSON.stringify(flag)} is not allowed; allowed options: ${describeAllowed(options)}`,
    };
  };

  for (let i = 0; i < words.length; i++) {
    const word = words[i]!;
    if (word === '--') {
      operands.push(...words.slice(i + 1));
      break;
    }
    if (word === '-' || !word.startsWith('-')) {
      operands.push(word);
      continue;
    }
    if (word.startsWith('--')) {
      const eq = word.indexOf('=');
      const name = eq === -1 ? word.slice(2) : word.slice(2, eq);
      const spec = byLong.get(name);
      if (!spec) return unknown(`--${name}`);
      if (spec.value.kind === 'none') {
        if (eq !== -1) return { ok: false, message: `${program} --${name} takes no value` };
        parsed.push({ spec });
        continue;
      }
      let value: string;
      if (eq !== -1) value = word.slice(eq + 1);
      else if (spec.equalsOnly) return { ok: false, message: `${program} --${name} needs a value written as --${name}=VALUE` };
      else if (i + 1 < words.length) value = words[++i]!;
      else return { ok: false, message: `${program} --${name} needs a value` };
      const bad = checkValue(program, spec, value);
      if (bad) return { ok: false, message: bad };
      parsed.push({ spec, value });
      continue;
    }
    // A cluster of short flags; the first value-taking one takes the rest of the cluster or the next word.
    for (let k = 1; k < word.length; k++) {
      const letter = word[k]!;
      const spec = byShort.get(letter);
      if (!spec) return unknown(`-${letter}`);
      if (spec.value.kind === 'none') {
        parsed.push({ spec });
        continue;
      }
      let value: string;
      if (k + 1 < word.length) value = word.slice(k + 1);
      else if (i + 1 < words.length) value = words[++i]!;
      else return { ok: false, message: `${program} -${letter} needs a value` };
      const bad = checkValue(program, spec, value);
      if (bad) return { ok: false, message: bad };
      parsed.push({ spec, value });
      break;
    }
  }
  return { ok: true, options: parsed, operands };
}

/** Re-emits parsed options canonically: '--long' / '--long=value' when a long name exists, else '-x' ['value']. */
export function emitOptions(options: ParsedOption[]): string[] {
  const out: string[] = [];
  for (const { spec, value } of options) {
    if (spec.long) out.push(value === undefined ? `--${spec.long}` : `--${spec.long}=${value}`);
    else if (value === undefined) out.push(`-${spec.short}`);
    else out.push(`-${spec.short}`, value);
  }
  return out;
}

import { sniffBinary } from './binary-file';
import { SANDBOX_LIMITS } from './limits';
import { asOperand, guardPath } from './paths';
import { regexLimitProblem } from './regex-limits';
import {
  choice,
  emitOptions,
  matching,
  none,
  number,
  parseOptions,
  signedNumber,
  text,
  type FlagSpec,
  type ProgramOptions,
} from './terminal-options';

/**
 * The restricted terminal's programs (CodeScout §3.2's bash tool, narrowed per its §6.2 finding that trained
 * agents converge on rg and sed plus a few Unix utilities): each program's allowed flags, which of its
 * arguments are paths, and how its argument list is rebuilt. Every path operand goes through the path guard
 * and is passed as a repo-relative path after '--' (or, for find, prefixed './' when it starts with '-'),
 * so no operand can ever become a flag.
 */
export const ALLOWED_PROGRAMS = ['rg', 'grep', 'sed', 'cat', 'head', 'tail', 'find', 'ls', 'wc'] as const;
export type AllowedProgram = (typeof ALLOWED_PROGRAMS)[number];

export const ALLOWED_SUMMARY =
  "Allowed: rg, grep, sed -n 'N,Mp' FILE, cat, head, tail, find (no -exec/-delete), ls, wc, joined with '|' " +
  "(e.g. rg -n 'def foo' src | head -20). Not allowed: ';', '&&', '||', '&', redirections, $VAR, $(...), " +
  'backticks, subshells. Paths are relative to the repository root.';

export type Prepared = { ok: true; args: string[] } | { ok: false; message: string };

const flag = (short: string | undefined, long: string | undefined, value = none, extra: Partial<FlagSpec> = {}): FlagSpec => ({
  ...(short ? { short } : {}),
  ...(long ? { long } : {}),
  value,
  ...extra,
});

const SORT_KEYS = choice('path', 'modified', 'accessed', 'created', 'none');
const TYPE_NAME = matching(/^[A-Za-z0-9_+-]{1,40}$/, 'a file type name (see rg --type-list)');

const RG: ProgramOptions = {
  program: 'rg',
  flags: [
    flag('i', 'ignore-case'),
    flag('s', 'case-sensitive'),
    flag('S', 'smart-case'),
    flag('F', 'fixed-strings'),
    flag('w', 'word-regexp'),
    flag('x', 'line-regexp'),
    flag('v', 'invert-match'),
    flag('n', 'line-number'),
    flag('N', 'no-line-number'),
    flag('l', 'files-with-matches'),
    flag(undefined, 'files-without-match'),
    flag('c', 'count'),
    flag(undefined, 'count-matches'),
    flag('o', 'only-matching'),
    flag('H', 'with-filename'),
    flag('I', 'no-filename'),
    flag(undefined, 'no-heading'),
    flag(undefined, 'heading'),
    flag('U', 'multiline'),
    flag(undefined, 'multiline-dotall'),
    flag('P', 'pcre2'),
    flag('.', 'hidden'),
    flag(undefined, 'no-ignore'),
    flag(undefined, 'no-ignore-vcs'),
    flag(undefined, 'files'),
    flag(undefined, 'type-list'),
    flag(undefined, 'column'),
    flag(undefined, 'vimgrep'),
    flag(undefined, 'trim'),
    flag('q', 'quiet'),
    flag(undefined, 'no-messages'),
    flag(undefined, 'json'),
    flag(undefined, 'stats'),
    flag('b', 'byte-offset'),
    flag(undefined, 'max-columns-preview'),
    flag(undefined, 'passthru'),
    flag(undefined, 'crlf'),
    flag('e', 'regexp', text, { role: 'pattern' }),
    flag('g', 'glob', text),
    flag(undefined, 'iglob', text),
    flag('t', 'type', TYPE_NAME),
    flag('T', 'type-not', TYPE_NAME),
    flag('A', 'after-context', number),
    flag('B', 'before-context', number),
    flag('C', 'context', number),
    flag('m', 'max-count', number),
    flag('M', 'max-columns', number),
    flag(undefined, 'max-depth', number),
    flag('j', 'threads', number),
    flag(undefined, 'sort', SORT_KEYS),
    flag(undefined, 'sortr', SORT_KEYS),
    flag('r', 'replace', text),
    flag(undefined, 'color', choice('never')),
    flag(undefined, 'max-filesize', matching(/^\d{1,12}[KMG]?$/, 'a size like 100K')),
    flag('E', 'encoding', matching(/^[A-Za-z0-9_-]{1,40}$/, 'an encoding name')),
    flag(undefined, 'engine', choice('default', 'pcre2', 'auto')),
  ],
  denied: {
    '--pre': 'it runs a program on every file',
    '--pre-glob': 'it belongs to --pre, which runs programs',
    '-z': 'it runs decompression programs',
    '--search-zip': 'it runs decompression programs',
    '--hostname-bin': 'it runs a program',
    '-L': 'following symlinks could leave the repository',
    '--follow': 'following symlinks could leave the repository',
    '-f': 'patterns come from -e or the command line',
    '--file': 'patterns come from -e or the command line',
    '--ignore-file': 'ignore files come from the repository only',
    '-a': 'binary files are not shown',
    '--text': 'binary files are not shown',
    '--binary': 'binary files are not shown',
    '-u': 'use --hidden / --no-ignore',
    '--unrestricted': 'use --hidden / --no-ignore',
    '-0': 'output is text; NUL separators are not shown',
    '--null': 'output is text; NUL separators are not shown',
    '-p': 'colour codes are not shown',
    '--pretty': 'colour codes are not shown',
    '--no-config': 'it is always on',
  },
};

const GREP: ProgramOptions = {
  program: 'grep',
  flags: [
    flag('i', 'ignore-case'),
    flag('v', 'invert-match'),
    flag('w', 'word-regexp'),
    flag('x', 'line-regexp'),
    flag('n', 'line-number'),
    flag('H', 'with-filename'),
    flag('h', 'no-filename'),
    flag('l', 'files-with-matches'),
    flag('L', 'files-without-match'),
    flag('c', 'count'),
    flag('o', 'only-matching'),
    flag('q', 'quiet'),
    flag('s', 'no-messages'),
    flag('r', 'recursive'),
    flag('E', 'extended-regexp'),
    flag('F', 'fixed-strings'),
    flag('G', 'basic-regexp'),
    flag('P', 'perl-regexp'),
    flag('I', undefined),
    flag('b', 'byte-offset'),
    flag('T', 'initial-tab'),
    flag(undefined, 'line-buffered'),
    flag('e', 'regexp', text, { role: 'pattern' }),
    flag('m', 'max-count', number),
    flag('A', 'after-context', number),
    flag('B', 'before-context', number),
    flag('C', 'context', number),
    flag(undefined, 'include', text),
    flag(undefined, 'exclude', text),
    flag(undefined, 'exclude-dir', text),
    flag(undefined, 'color', choice('never', 'auto'), { equalsOnly: true }),
    flag(undefined, 'colour', choice('never', 'auto'), { equalsOnly: true }),
    flag('d', 'directories', choice('skip', 'recurse')),
    flag(undefined, 'binary-files', choice('binary', 'without-match')),
  ],
  denied: {
    '-f': 'patterns come from -e or the command line',
    '--file': 'patterns come from -e or the command line',
    '-R': 'following symlinks could leave the repository; use -r',
    '--dereference-recursive': 'following symlinks could leave the repository; use -r',
    '--exclude-from': 'exclusion lists come from the command line',
    '--include-from': 'not a GNU grep option',
    '-D': 'devices are never read',
    '--devices': 'devices are never read',
    '-a': 'binary files are not shown',
    '--text': 'binary files are not shown',
    '-z': 'output is text',
    '--null-data': 'output is text',
    '-Z': 'output is text',
    '--null': 'output is text',
  },
};

const SED: ProgramOptions = {
  program: 'sed',
  flags: [flag('n', 'quiet'), flag(undefined, 'silent'), flag('e', 'expression', text, { role: 'script' })],
  denied: {
    '-i': 'the terminal is read-only',
    '--in-place': 'the terminal is read-only',
    '-f': 'scripts come from the command line',
    '--file': 'scripts come from the command line',
    '-s': 'not needed',
    '-E': "only 'N,Mp' scripts are allowed",
    '-r': "only 'N,Mp' scripts are allowed",
  },
};

const CAT: ProgramOptions = {
  program: 'cat',
  flags: [
    flag('n', 'number'),
    flag('b', 'number-nonblank'),
    flag('s', 'squeeze-blank'),
    flag('E', 'show-ends'),
    flag('T', 'show-tabs'),
    flag('A', 'show-all'),
    flag('v', 'show-nonprinting'),
  ],
  denied: {},
};

/** head and tail take the same options (GNU coreutils); tail's following options are denied below. */
const HEAD_TAIL_FLAGS = [
  flag('n', 'lines', signedNumber),
  flag('c', 'bytes', signedNumber),
  flag('q', 'quiet'),
  flag(undefined, 'silent'),
  flag('v', 'verbose'),
];

const HEAD: ProgramOptions = {
  program: 'head',
  flags: HEAD_TAIL_FLAGS,
  denied: {},
};

const TAIL: ProgramOptions = {
  program: 'tail',
  flags: HEAD_TAIL_FLAGS,
  denied: {
    '-f': 'following a file never ends',
    '--follow': 'following a file never ends',
    '-F': 'following a file never ends',
    '--retry': 'following a file never ends',
    '--pid': 'following a file never ends',
    '-s': 'following a file never ends',
    '--sleep-interval': 'following a file never ends',
  },
};

const WC: ProgramOptions = {
  program: 'wc',
  flags: [flag('l', 'lines'), flag('w', 'words'), flag('c', 'bytes'), flag('m', 'chars'), flag('L', 'max-line-length')],
  denied: { '--files0-from': 'file lists come from the command line' },
};

const LS: ProgramOptions = {
  program: 'ls',
  flags: [
    flag('a', 'all'),
    flag('A', 'almost-all'),
    flag('l', undefined),
    flag('1', undefined),
    flag('R', 'recursive'),
    flag('h', 'human-readable'),
    flag('S', undefined),
    flag('t', undefined),
    flag('r', 'reverse'),
    flag('d', 'directory'),
    flag('F', 'classify'),
    flag('p', undefined),
    flag('s', 'size'),
    flag(undefined, 'group-directories-first'),
  ],
  denied: {
    '-L': 'following symlinks could leave the repository',
    '--dereference': 'following symlinks could leave the repository',
    '-H': 'following symlinks could leave the repository',
    '--dereference-command-line': 'following symlinks could leave the repository',
  },
};

/** sed scripts allowed: print line N, or lines N..M ('$' = last line). */
const SED_SCRIPT = /^\s*(\d{1,9}|\$)(\s*,\s*(\d{1,9}|\$))?\s*p\s*$/;

export interface GuardContext {
  root: string;
}

/** A path operand through the guard, as the repo-relative argument the program will get. */
async function pathOperand(ctx: GuardContext, program: string, operand: string): Promise<Prepared> {
  if (operand === '-') return { ok: true, args: ['-'] };
  const guarded = await guardPath(ctx.root, operand, { gitControlData: 'missing' });
  if (!guarded.ok) return { ok: false, message: `${program}: ${guarded.message}` };
  // A FIFO or device could block or stream forever; only files and directories are operands.
  if (guarded.kind === 'other') return { ok: false, message: `${program}: ${JSON.stringify(operand)} is not a regular file or directory` };
  return { ok: true, args: [asOperand(guarded.relative)] };
}

async function pathOperands(ctx: GuardContext, program: string, operands: string[]): Promise<Prepared> {
  const args: string[] = [];
  for (const operand of operands) {
    const one = await pathOperand(ctx, program, operand);
    if (!one.ok) return one;
    args.push(...one.args);
  }
  return { ok: true, args };
}

async function prepareSearch(words: string[], spec: ProgramOptions, ctx: GuardContext): Promise<Prepared> {
  const parsed = parseOptions(words, spec);
  if (!parsed.ok) return parsed;
  const program = spec.program;
  const hasPatternOption = parsed.options.some((o) => o.spec.role === 'pattern');
  const listsOnly = parsed.options.some((o) => o.spec.long === 'files' || o.spec.long === 'type-list');
  const operands = [...parsed.operands];
  const patterns: string[] = [];
  if (!hasPatternOption && !listsOnly) {
    const pattern = operands.shift();
    if (pattern === undefined) return { ok: false, message: `${program} needs a pattern, e.g. ${program} -n 'def main' src` };
    patterns.push(pattern);
  }
  for (const p of [...patterns, ...parsed.options.filter((o) => o.spec.role === 'pattern').map((o) => o.value!)]) {
    const problem = regexLimitProblem(p, `${program}: the pattern`);
    if (problem) return { ok: false, message: problem };
  }
  // Every -j/--threads is checked (rg takes the last one), and 0 is refused with the rest: to rg it means
  // "choose automatically", one thread per core.
  const threadOptions = parsed.options.filter((o) => o.spec.long === 'threads');
  for (const option of threadOptions) {
    const count = Number(option.value);
    if (!(count >= 1 && count <= SANDBOX_LIMITS.maxSearchThreads)) {
      return {
        ok: false,
        message: `rg -j ${option.value}: at most ${SANDBOX_LIMITS.maxSearchThreads} threads and at least 1 (0 means automatic: one per core); limit exceeded`,
      };
    }
  }
  const threads = threadOptions.at(-1);
  const paths = await pathOperands(ctx, program, operands);
  if (!paths.ok) return paths;
  const prefix =
    program === 'rg'
      ? ['--no-config', '--no-ignore-parent', '--no-ignore-global', ...(threads ? [] : [`--threads=${SANDBOX_LIMITS.maxSearchThreads}`])]
      : [];
  // `.git` is never searched (its file names the bare clone outside the root), in any letter case. ripgrep
  // applies every --iglob after every --glob and the last match wins, so the exclusion is an --iglob placed
  // after the model's own: no --glob or --iglob of the model can re-include it. GNU grep: the last matching
  // --include/--exclude wins, and --exclude-dir has no counterpart that re-includes.
  const gitExclusion = program === 'rg' ? ['--iglob=!.git'] : ['--exclude-dir=.[Gg][Ii][Tt]', '--exclude=.[Gg][Ii][Tt]'];
  return {
    ok: true,
    // A positional pattern becomes --regexp=PATTERN: one word that no parser can read as a flag.
    args: [...prefix, ...emitOptions(parsed.options), ...gitExclusion, ...patterns.map((p) => `--regexp=${p}`), '--', ...paths.args],
  };
}

async function prepareSed(words: string[], ctx: GuardContext): Promise<Prepared> {
  const parsed = parseOptions(words, SED);
  if (!parsed.ok) return parsed;
  const quiet = parsed.options.some((o) => o.spec.short === 'n' || o.spec.long === 'silent');
  const scripts = parsed.options.filter((o) => o.spec.role === 'script').map((o) => o.value!);
  const operands = [...parsed.operands];
  if (scripts.length === 0 && operands.length > 0) scripts.push(operands.shift()!);
  if (!quiet || scripts.length !== 1 || !SED_SCRIPT.test(scripts[0]!)) {
    return { ok: false, message: "sed is limited to printing lines: sed -n 'Np' FILE or sed -n 'N,Mp' FILE (M may be $)" };
  }
  const paths = await pathOperands(ctx, 'sed', operands);
  if (!paths.ok) return paths;
  // sed holds a whole line in memory: a binary or sparse file can be one gigabyte-long line, which under
  // the address-space limit makes sed stop silently with no output. Refuse it up front, clearly.
  for (const operand of paths.args) {
    if (operand === '-') continue;
    const guarded = await guardPath(ctx.root, operand);
    if (guarded.ok && guarded.kind === 'file') {
      const sniff = await sniffBinary(guarded.absolute);
      if (sniff.binary)
        return { ok: false, message: `sed: ${JSON.stringify(operand)} is a binary file (${sniff.reason}); sed shows text files only` };
    }
  }
  return { ok: true, args: ['-n', '-e', scripts[0]!.replace(/\s+/g, ''), '--', ...paths.args] };
}

async function prepareFileTool(words: string[], spec: ProgramOptions, ctx: GuardContext, withDashCount = false): Promise<Prepared> {
  // head -20 / tail -5: the obsolete count form, rewritten to -n.
  const normalized = withDashCount ? words.flatMap((w) => (/^-\d{1,9}$/.test(w) ? ['-n', w.slice(1)] : [w])) : words;
  const parsed = parseOptions(normalized, spec);
  if (!parsed.ok) return parsed;
  const paths = await pathOperands(ctx, spec.program, parsed.operands);
  if (!paths.ok) return paths;
  return { ok: true, args: [...emitOptions(parsed.options), '--', ...paths.args] };
}

const FIND_UNARY = new Set([
  '-print',
  '-prune',
  '-empty',
  '-true',
  '-false',
  '-quit',
  '-not',
  '!',
  '-a',
  '-and',
  '-o',
  '-or',
  '(',
  ')',
  '-depth',
]);
/**
 * -printf directives allowed: everything about the entry itself, nothing about a symlink's target (%l
 * prints it, %Y stats it: both would reveal names or existence outside the root). Flags and a width may
 * precede a directive; %T, %A and %C take one format letter. A one-pass scanner, not a RegExp: the
 * equivalent regex backtracks through every way to split '0's between flags and width, so
 * `'%00d'` written 18 times and then `%l` took it a minute.
 */
const FIND_PRINTF = {
  test(format: string): boolean {
    const isDigit = (c: string | undefined) => c !== undefined && c >= '0' && c <= '9';
    let i = 0;
    while (i < format.length) {
      const c = format[i]!;
      if (c === '\\') {
        if (!'ntr\\'.includes(format[i + 1] ?? '@')) return false;
        i += 2;
        continue;
      }
      if (c !== '%') {
        i += 1;
        continue;
      }
      i += 1;
      if (format[i] === '%') {
        i += 1;
        continue;
      }
      // Taking the longest flags and then the longest width accepts exactly what any split would.
      for (let n = 0; n < 4 && '-+ #0'.includes(format[i] ?? '@'); n++) i++;
      for (let n = 0; n < 4 && isDigit(format[i]); n++) i++;
      if (format[i] === '.' && isDigit(format[i + 1])) {
        i += 1;
        for (let n = 0; n < 4 && isDigit(format[i]); n++) i++;
      }
      const directive = format[i] ?? '';
      if (directive !== '' && 'pPfhHsdyimMkbnugUGDFtac'.includes(directive)) i += 1;
      else if (directive !== '' && 'TAC'.includes(directive) && /^[@a-zA-Z+]$/.test(format[i + 1] ?? '')) i += 2;
      else return false;
    }
    return true;
  },
};
const FIND_BINARY: Record<string, { test(value: string): boolean } | null> = {
  '-name': null,
  '-iname': null,
  '-path': null,
  '-ipath': null,
  '-wholename': null,
  '-iwholename': null,
  '-regex': null,
  '-iregex': null,
  '-printf': FIND_PRINTF,
  '-type': /^[fdlpsb](,[fdlpsb])*$/,
  '-maxdepth': /^\d{1,4}$/,
  '-mindepth': /^\d{1,4}$/,
  '-size': /^[+-]?\d{1,12}[bcwkMG]?$/,
  '-mtime': /^[+-]?\d{1,9}$/,
  '-mmin': /^[+-]?\d{1,9}$/,
  // A plain date or date-time only: find's date parser also takes TZ="<file>", which opens that file.
  '-newermt': /^\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?)?$/,
  '-regextype': /^(emacs|posix-awk|posix-basic|posix-egrep|posix-extended|egrep|grep|findutils-default)$/,
};
const FIND_DENIED: Record<string, string> = {
  '-exec': 'find runs no programs',
  '-execdir': 'find runs no programs',
  '-ok': 'find runs no programs',
  '-okdir': 'find runs no programs',
  '-delete': 'the terminal is read-only',
  '-fprint': 'the terminal is read-only',
  '-fprint0': 'the terminal is read-only',
  '-fprintf': 'the terminal is read-only',
  '-fls': 'the terminal is read-only',
  '-files0-from': 'start paths come from the command line',
  '-L': 'following symlinks could leave the repository',
  '-H': 'following symlinks could leave the repository',
  '-follow': 'following symlinks could leave the repository',
  '-print0': 'output is text; use -print',
  '-D': 'debug options are not available',
  '-newer': 'compare with -newermt instead',
  '-lname': 'symlink targets are not shown or matched',
  '-ilname': 'symlink targets are not shown or matched',
  '-xtype': 'it looks through symlinks; use -type',
  '-readable': 'it looks through symlinks',
  '-executable': 'it looks through symlinks',
  '-ls': "it prints symlink targets; use -printf '%M %s %p\\n'",
};

async function prepareFind(words: string[], ctx: GuardContext): Promise<Prepared> {
  let i = 0;
  while (i < words.length && /^-[PHLDO]/.test(words[i]!) && !(words[i]! in FIND_BINARY) && !FIND_UNARY.has(words[i]!)) {
    if (words[i] !== '-P') {
      const w = words[i]!;
      return {
        ok: false,
        message: `find ${w} is not allowed: ${FIND_DENIED[w.slice(0, 2)] ?? 'only -P (never follow symlinks) is allowed'}`,
      };
    }
    i += 1;
  }
  const starts: string[] = [];
  while (i < words.length && !words[i]!.startsWith('-') && words[i] !== '!' && words[i] !== '(' && words[i] !== ')') {
    starts.push(words[i]!);
    i += 1;
  }
  const expression: string[] = [];
  const globalOptions: string[] = [];
  let hasAction = false;
  for (; i < words.length; i++) {
    const word = words[i]!;
    // Global options go before the pruning (find warns when one follows a test); in the expression they
    // were true, and stay so.
    if (word === '-depth') {
      globalOptions.push(word);
      expression.push('-true');
      continue;
    }
    if (FIND_UNARY.has(word)) {
      if (word === '-print' || word === '-quit') hasAction = true;
      expression.push(word);
      continue;
    }
    if (word in FIND_BINARY) {
      const value = words[i + 1];
      if (value === undefined) return { ok: false, message: `find ${word} needs a value` };
      const rule = FIND_BINARY[word];
      if (rule && !rule.test(value)) return { ok: false, message: `find ${word} does not accept ${JSON.stringify(value)}` };
      if (word === '-regex' || word === '-iregex') {
        const problem = regexLimitProblem(value, `find ${word}`);
        if (problem) return { ok: false, message: problem };
      }
      if (word === '-printf') hasAction = true;
      if (word === '-maxdepth' || word === '-mindepth') {
        globalOptions.push(word, value);
        expression.push('-true');
      } else expression.push(word, value);
      i += 1;
      continue;
    }
    const reason = FIND_DENIED[word];
    return {
      ok: false,
      message: reason
        ? `find ${word} is not allowed: ${reason}`
        : `find ${JSON.stringify(word)} is not allowed; allowed: ${[...Object.keys(FIND_BINARY), ...FIND_UNARY].join(' ')}`,
    };
  }
  const paths = await pathOperands(ctx, 'find', starts.length ? starts : ['.']);
  if (!paths.ok) return paths;
  // find has no '--': a start path is made safe by asOperand ('./-x'), and '.' stays '.'.
  return { ok: true, args: [...paths.args, ...globalOptions, ...withoutGit(expression, hasAction)] };
}

/**
 * The model's find expression with `.git` (any letter case) pruned in front of it, so find's own walk never
 * lists git's control data (the namespace's `.git` is empty anyway; this is the second layer). `-ipath
 * '*\/.git/*'` also holds under -depth, where -prune does nothing. An expression without an action gets
 * the -print find would have added to the whole, now only to the model's part.
 */
function withoutGit(expression: string[], hasAction: boolean): string[] {
  const pruneGit = ['(', '-iname', '.git', '-o', '-ipath', '*/.git/*', ')', '-prune', '-o'];
  const model = expression.length > 0 ? ['(', ...expression, ')'] : [];
  return [...pruneGit, ...model, ...(hasAction ? [] : ['-print'])];
}

export function isAllowedProgram(name: string): name is AllowedProgram {
  return (ALLOWED_PROGRAMS as readonly string[]).includes(name);
}

/** Validates one pipeline stage's arguments and rebuilds them; never runs anything. */
export async function prepareProgram(program: AllowedProgram, words: string[], ctx: GuardContext): Promise<Prepared> {
  switch (program) {
    case 'rg':
      return prepareSearch(words, RG, ctx);
    case 'grep':
      return prepareSearch(words, GREP, ctx);
    case 'sed':
      return prepareSed(words, ctx);
    case 'cat':
      return prepareFileTool(words, CAT, ctx);
    case 'head':
      return prepareFileTool(words, HEAD, ctx, true);
    case 'tail':
      return prepareFileTool(words, TAIL, ctx, true);
    case 'wc':
      return prepareFileTool(words, WC, ctx);
    case 'ls':
      return prepareFileTool(words, LS, ctx);
    case 'find':
      return prepareFind(words, ctx);
  }
}

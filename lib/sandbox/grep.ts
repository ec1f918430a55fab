import type { GrepArgs, ToolResult } from '../../schemas/tools';
import { sniffBinary } from './binary-file';
import { defaultEngine, engineExecutables, type SandboxOptions } from './engine';
import { compileGlob, passesGlobs, pathSortKey, type CompiledGlob } from './glob-match';
import { normalizeGlobPattern, trimTrailingSlashes } from './glob-pattern';
import { SANDBOX_LIMITS } from './limits';
import { LineSplitter } from './line-splitter';
import { fitOutput, sanitizeText } from './output';
import { asOperand, guardPath } from './paths';
import { regexLimitProblem } from './regex-limits';
import { describeLimit, runPipeline, toolPlacement, type Stage } from './subprocess';
import { answerWithoutThrowing, displayPath, errorResult, seconds, slotWaitTimeout } from './tool-result';

interface Match {
  path: string;
  /** pathSortKey(path): sorting by it is comparePaths order with native string comparison. */
  key: string;
  line: number;
  text: string;
}

/** ripgrep's in-band notes about binary files ("path: binary file matches (found "\0" byte around offset N)"). */
const RG_BINARY_NOTES = [
  ': WARNING: stopped searching binary file after match (found "\\0" byte around offset ',
  ': binary file matches (found "\\0" byte around offset ',
];

/**
 * The path of a ripgrep binary-file note, or null for any other line. String scans only (the note's
 * phrase, then digits and ')' to the end): a lazy `^(.*?): ...$` RegExp retries at every ': ' of a line.
 */
export function binaryNotePath(line: string): string | null {
  if (!line.endsWith(')')) return null;
  let digits = line.length - 1;
  while (digits > 0 && line[digits - 1]! >= '0' && line[digits - 1]! <= '9') digits--;
  if (digits === line.length - 1) return null;
  for (const phrase of RG_BINARY_NOTES) {
    const at = digits - phrase.length;
    if (at >= 0 && line.startsWith(phrase, at)) return line.slice(0, at);
  }
  return null;
}

function describeScope(path: string, glob: string | undefined): string {
  return `${path === '.' ? 'the repository' : path}${glob ? ` (files matching ${JSON.stringify(glob)})` : ''}`;
}

/** GNU grep's --include matches base names with fnmatch: usable as a prefilter only for a plain last segment. */
function includePrefilter(glob: string): string | null {
  if (glob.startsWith('!')) return null;
  const last = trimTrailingSlashes(glob).split('/').pop() ?? '';
  return last && !/[\\{}[\]]|\*\*/.test(last) ? last : null;
}

/**
 * How the sandbox's grep runs ripgrep, whatever the pattern: no config file, `path\0line:text` lines sorted by
 * path, hidden and ignored files included (the files GNU grep sees). bench/tools.ts runs raw ripgrep with the
 * same arguments as its reference.
 */
export const RIPGREP_OUTPUT_ARGS: readonly string[] = [
  '--no-config',
  '--color=never',
  '--no-heading',
  '--with-filename',
  '--line-number',
  '--null',
  '--hidden',
  '--no-ignore',
  '--sort=path',
];

function buildStage(engine: 'rg' | 'grep', executable: string, pattern: string, operand: string | null, glob: string | undefined): Stage {
  const paths = operand === null ? [] : [operand];
  if (engine === 'rg') {
    const globs = glob ? [`--glob=${glob}`] : [];
    return {
      executable,
      // --no-config: no RIPGREP_CONFIG_PATH; --no-ignore/--hidden: the same files GNU grep sees; the .git
      // exclusion is an --iglob (ripgrep applies those after every --glob; the last match wins), so a user
      // glob like '*' cannot re-include `.git` in any letter case; no -L: symlinks are not followed.
      args: [
        ...RIPGREP_OUTPUT_ARGS,
        `--threads=${SANDBOX_LIMITS.maxSearchThreads}`,
        ...globs,
        '--iglob=!.git',
        '-e',
        pattern,
        '--',
        ...paths,
      ],
    };
  }
  const include = glob ? includePrefilter(glob) : null;
  return {
    executable,
    // -r (not -R): symlinks met while recursing are not followed; -I: binary files are skipped; -E: POSIX ERE.
    args: [
      '-r',
      '-n',
      '-H',
      '-I',
      '--null',
      '--color=never',
      '-E',
      '--exclude-dir=.[Gg][Ii][Tt]',
      '--exclude=.[Gg][Ii][Tt]',
      ...(include ? [`--include=${include}`] : []),
      '-e',
      pattern,
      '--',
      ...paths,
    ],
  };
}

/**
 * The grep tool (docs/design.md "Tools"): regex search inside one worktree, optionally scoped to a path and a glob. Shows at
 * most 50 matches as "path:line:text" (repo-relative paths, sorted by path then line) in at most 4096
 * characters, each cut with a marker. Binary files are skipped (ripgrep: skipped while walking, reported when
 * named; GNU grep: -I). Never throws.
 */
export async function grep(root: string, args: GrepArgs, options: SandboxOptions = {}): Promise<ToolResult> {
  return answerWithoutThrowing('grep', () => grepUnsafe(root, args, options));
}

async function grepUnsafe(root: string, args: GrepArgs, options: SandboxOptions): Promise<ToolResult> {
  const engine = options.engine ?? defaultEngine();
  const programs = engineExecutables(engine);
  if (!programs.ok) return errorResult(programs.message);
  const pattern = args.pattern;
  if (typeof pattern !== 'string' || pattern.length === 0) return errorResult('grep: pattern must be a non-empty string');
  if (pattern.includes('\0')) return errorResult('grep: pattern contains a NUL byte; refused');
  if (/[\r\n]/.test(pattern)) return errorResult('grep: pattern must be a single line (no newline)');
  const tooBig = regexLimitProblem(pattern, 'grep: the pattern');
  if (tooBig) return errorResult(tooBig);

  const scope = await guardPath(root, args.path ?? '.', { gitControlData: 'missing' });
  if (!scope.ok) return errorResult(`grep: ${scope.message}`);
  if (scope.kind === 'other') return errorResult(`grep: ${displayPath(scope.relative)} is not a regular file or directory`);
  const where = describeScope(displayPath(scope.relative), args.glob);
  if (scope.kind === 'file') {
    const sniff = await sniffBinary(scope.absolute);
    if (sniff.binary) {
      return { status: 'ok', output: `${displayPath(scope.relative)}: binary file (${sniff.reason}); not searched` };
    }
  }
  let globs: CompiledGlob[] = [];
  let globArg: string | undefined;
  if (args.glob !== undefined) {
    const normalized = normalizeGlobPattern(args.glob, root, scope.root);
    if (!normalized.ok) return errorResult(`grep: ${normalized.message}`);
    globArg = normalized.pattern;
    const compiled = compileGlob(globArg);
    if (!compiled.ok) return errorResult(`grep: ${compiled.message}`);
    globs = [compiled.glob];
  }

  const limits = SANDBOX_LIMITS;
  const matches: Match[] = [];
  const binaryNotes: string[] = [];
  let countCapped = false;
  const filterByGlob = engine === 'grep' && globs.length > 0 && scope.kind === 'directory';
  let lastPath = '';
  let lastPathPasses = false;
  const splitter = new LineSplitter(limits.maxPathChars + limits.maxMatchLineChars * 4 + 32, (record, fullBytes) => {
    const nul = record.indexOf(0);
    if (nul === -1) {
      const notePath = binaryNotePath(record.toString('utf8'));
      if (notePath !== null && binaryNotes.length < 5)
        binaryNotes.push(`${displayPath(notePath)}: binary data found; rest of file skipped`);
      return 'more';
    }
    const path = displayPath(record.subarray(0, nul).toString('utf8'));
    const rest = record.subarray(nul + 1).toString('utf8');
    const colon = rest.indexOf(':');
    const line = Number(rest.slice(0, colon));
    if (colon <= 0 || !Number.isInteger(line)) return 'more';
    if (filterByGlob) {
      // grep prints a file's matches together: each file is matched against the glob once, not per line.
      if (path !== lastPath) {
        lastPath = path;
        lastPathPasses = passesGlobs(globs, path);
      }
      if (!lastPathPasses) return 'more';
    }
    let text = sanitizeText(rest.slice(colon + 1)).text;
    const omitted = fullBytes - record.length;
    if (text.length > limits.maxMatchLineChars || omitted > 0) {
      text = `${text.slice(0, limits.maxMatchLineChars)} …[line cut]`;
    }
    if (matches.length === limits.grepCountLimit) {
      // A match past the count limit: enough to say "more than", no need to read on.
      countCapped = true;
      return 'enough';
    }
    matches.push({ path, key: pathSortKey(path), line, text });
    // ripgrep's output is already in display order: past the matches shown, only count the rest.
    return engine === 'rg' && matches.length === limits.maxGrepMatches ? 'enough' : 'more';
  });
  let counted = 0;
  const countRest = (chunk: Buffer, from: number): 'more' | 'enough' => {
    for (let at = chunk.indexOf(0x0a, from); at !== -1; at = chunk.indexOf(0x0a, at + 1)) counted += 1;
    if (matches.length + counted <= limits.grepCountLimit) return 'more';
    countCapped = true;
    return 'enough';
  };
  const onStdout = (chunk: Buffer): 'more' | 'enough' => {
    if (countCapped) return 'enough';
    if (!splitter.done) {
      if (splitter.push(chunk) === 'more' || countCapped) return countCapped ? 'enough' : 'more';
      return countRest(chunk, splitter.stoppedAt);
    }
    return countRest(chunk, 0);
  };

  const timeoutMs = options.timeoutMs ?? limits.grepTimeoutMs;
  const operand = scope.relative === '.' ? null : asOperand(scope.relative);
  const run = await runPipeline([buildStage(engine, programs.search, pattern, operand, globArg)], {
    cwd: scope.root,
    placement: toolPlacement(scope.root, options.isolation),
    timeoutMs,
    signal: options.signal,
    ...(options.resourceLimits ? { resourceLimits: options.resourceLimits } : {}),
    onStdout,
  });
  if (!splitter.done) splitter.end();
  // countRest counts '\n'-terminated lines; ripgrep ends every line it prints with one.
  const total = matches.length + counted;
  const outcome = run.stages[0]!;
  if (outcome.spawnError) return errorResult(`grep could not start ${engine}: ${outcome.spawnError}`);

  matches.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.line - b.line));
  const shown = matches.slice(0, limits.maxGrepMatches);
  const body = shown.map((m) => `${m.path}:${m.line}:${m.text}`).join('\n');
  const notes = [...binaryNotes];
  const more = total > limits.maxGrepMatches || countCapped;
  if (more) {
    const of = countCapped ? `more than ${limits.grepCountLimit}` : String(total);
    notes.push(`[showing the first ${shown.length} of ${of} matches; narrow the pattern, path or glob to see the others]`);
  }

  if (run.aborted) return errorResult('grep was cancelled', fitOutput(body, notes).output);
  if (run.timedOut && run.waitedForSlots) return errorResult(`grep ${slotWaitTimeout(timeoutMs)}`);
  if (outcome.limitExceeded)
    return errorResult(`grep: ${describeLimit(outcome.limitExceeded, options.resourceLimits)}`, fitOutput(body, notes).output);
  if (run.timedOut) {
    // Only matches that exist are called partial.
    const found = body ? 'the matches above are partial' : 'no match had been found by then';
    const message = `grep timed out after ${seconds(timeoutMs)} and was stopped; ${found}. Use a simpler pattern or a narrower path or glob.`;
    return errorResult(message, fitOutput(body, notes).output);
  }
  const exitCode = outcome.exitCode;
  if (matches.length === 0) {
    if (outcome.stderr.includes('No files were searched')) {
      return { status: 'ok', output: `No matches for ${JSON.stringify(pattern)} in ${where}: no file there matches the glob.` };
    }
    if (exitCode === 2 || (exitCode !== 0 && exitCode !== 1 && !run.stoppedEarly)) {
      const detail = sanitizeText(outcome.stderr).text.trim().split('\n').slice(0, 6).join('\n');
      return errorResult(`grep failed: ${detail || `exit code ${exitCode}`}`);
    }
    const none = `No matches for ${JSON.stringify(pattern)} in ${where}.`;
    return { status: 'ok', output: binaryNotes.length ? `${none}\n${binaryNotes.join('\n')}` : none };
  }
  const fitted = fitOutput(body, notes, (shownBody) => {
    const lines = shownBody ? shownBody.split('\n').length : 0;
    return `[output cut to ${limits.maxOutputChars} characters: ${lines} of ${shown.length} matches shown]`;
  });
  if (!more && !fitted.cut) return { status: 'ok', output: fitted.output };
  return { status: 'truncated', output: fitted.output, message: [fitted.cutNote, ...notes].filter(Boolean).join(' ') };
}

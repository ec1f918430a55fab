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
import { describeLimit, runPipeline, toolPlacement, type PipelineOutcome, type Stage } from './subprocess';
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
  const refusal = patternRefusal(pattern);
  if (refusal) return errorResult(refusal);
  const scope = await searchScope(root, args);
  if (!scope.ok) return scope.answer;

  const filter = engine === 'grep' && scope.globs.length > 0 && scope.kind === 'directory' ? scope.globs : null;
  const collector = new MatchCollector(engine, filter);
  const timeoutMs = options.timeoutMs ?? SANDBOX_LIMITS.grepTimeoutMs;
  const operand = scope.relative === '.' ? null : asOperand(scope.relative);
  const run = await runPipeline([buildStage(engine, programs.search, pattern, operand, scope.globArg)], {
    cwd: scope.root,
    placement: toolPlacement(scope.root, options.isolation),
    timeoutMs,
    signal: options.signal,
    ...(options.resourceLimits ? { resourceLimits: options.resourceLimits } : {}),
    onStdout: (chunk) => collector.onStdout(chunk),
  });
  collector.end();
  const outcome = run.stages[0]!;
  if (outcome.spawnError) return errorResult(`grep could not start ${engine}: ${outcome.spawnError}`);
  return grepAnswer(run, collector, { pattern, where: scope.where, timeoutMs, resourceLimits: options.resourceLimits });
}

/** Why the pattern is refused before anything runs, or null. */
function patternRefusal(pattern: string): string | null {
  if (typeof pattern !== 'string' || pattern.length === 0) return 'grep: pattern must be a non-empty string';
  if (pattern.includes('\0')) return 'grep: pattern contains a NUL byte; refused';
  if (/[\r\n]/.test(pattern)) return 'grep: pattern must be a single line (no newline)';
  return regexLimitProblem(pattern, 'grep: the pattern');
}

type SearchScope =
  | {
      ok: true;
      root: string;
      relative: string;
      kind: 'file' | 'directory';
      /** The scope as the answers name it. */
      where: string;
      globs: CompiledGlob[];
      /** The glob as the search program is given it (relative to the repository root). */
      globArg: string | undefined;
    }
  | { ok: false; answer: ToolResult };

/** Where to search: the guarded path and the glob; a binary file named as the path is answered at once. */
async function searchScope(root: string, args: GrepArgs): Promise<SearchScope> {
  const scope = await guardPath(root, args.path ?? '.', { gitControlData: 'missing' });
  if (!scope.ok) return { ok: false, answer: errorResult(`grep: ${scope.message}`) };
  if (scope.kind === 'other') {
    return { ok: false, answer: errorResult(`grep: ${displayPath(scope.relative)} is not a regular file or directory`) };
  }
  const where = describeScope(displayPath(scope.relative), args.glob);
  if (scope.kind === 'file') {
    const sniff = await sniffBinary(scope.absolute);
    if (sniff.binary) {
      return { ok: false, answer: { status: 'ok', output: `${displayPath(scope.relative)}: binary file (${sniff.reason}); not searched` } };
    }
  }
  const { root: canonical, relative, kind } = scope;
  if (args.glob === undefined) return { ok: true, root: canonical, relative, kind, where, globs: [], globArg: undefined };
  const normalized = normalizeGlobPattern(args.glob, root, canonical);
  if (!normalized.ok) return { ok: false, answer: errorResult(`grep: ${normalized.message}`) };
  const compiled = compileGlob(normalized.pattern);
  if (!compiled.ok) return { ok: false, answer: errorResult(`grep: ${compiled.message}`) };
  return { ok: true, root: canonical, relative, kind, where, globs: [compiled.glob], globArg: normalized.pattern };
}

/**
 * Reads the search's `path\0line:text` records as they stream in: keeps the matches (at most the count
 * limit) and ripgrep's notes about binary files; past what it keeps, only counts lines, up to the count limit.
 */
class MatchCollector {
  readonly matches: Match[] = [];
  readonly binaryNotes: string[] = [];
  /** More than grepCountLimit matches: the search was stopped. */
  countCapped = false;
  private counted = 0;
  private lastPath = '';
  private lastPathPasses = false;
  private readonly splitter: LineSplitter;

  constructor(
    private readonly engine: 'rg' | 'grep',
    /** The globs GNU grep's matches are filtered by here (its --include cannot say all they say); null: none. */
    private readonly globFilter: CompiledGlob[] | null,
  ) {
    const limits = SANDBOX_LIMITS;
    this.splitter = new LineSplitter(limits.maxPathChars + limits.maxMatchLineChars * 4 + 32, (record, fullBytes) =>
      this.onRecord(record, fullBytes),
    );
  }

  /** Every match seen: those kept and those only counted. */
  get total(): number {
    // countRest counts '\n'-terminated lines; ripgrep ends every line it prints with one.
    return this.matches.length + this.counted;
  }

  onStdout(chunk: Buffer): 'more' | 'enough' {
    if (this.countCapped) return 'enough';
    if (!this.splitter.done) {
      if (this.splitter.push(chunk) === 'more' || this.countCapped) return this.countCapped ? 'enough' : 'more';
      return this.countRest(chunk, this.splitter.stoppedAt);
    }
    return this.countRest(chunk, 0);
  }

  end(): void {
    if (!this.splitter.done) this.splitter.end();
  }

  private onRecord(record: Buffer, fullBytes: number): 'more' | 'enough' {
    const limits = SANDBOX_LIMITS;
    const nul = record.indexOf(0);
    if (nul === -1) {
      const notePath = binaryNotePath(record.toString('utf8'));
      if (notePath !== null && this.binaryNotes.length < 5)
        this.binaryNotes.push(`${displayPath(notePath)}: binary data found; rest of file skipped`);
      return 'more';
    }
    const path = displayPath(record.subarray(0, nul).toString('utf8'));
    const rest = record.subarray(nul + 1).toString('utf8');
    const colon = rest.indexOf(':');
    const line = Number(rest.slice(0, colon));
    if (colon <= 0 || !Number.isInteger(line)) return 'more';
    if (!this.passesFilter(path)) return 'more';
    let text = sanitizeText(rest.slice(colon + 1)).text;
    const omitted = fullBytes - record.length;
    if (text.length > limits.maxMatchLineChars || omitted > 0) {
      text = `${text.slice(0, limits.maxMatchLineChars)} …[line cut]`;
    }
    if (this.matches.length === limits.grepCountLimit) {
      // A match past the count limit: enough to say "more than", no need to read on.
      this.countCapped = true;
      return 'enough';
    }
    this.matches.push({ path, key: pathSortKey(path), line, text });
    // ripgrep's output is already in display order: past the matches shown, only count the rest.
    return this.engine === 'rg' && this.matches.length === limits.maxGrepMatches ? 'enough' : 'more';
  }

  private passesFilter(path: string): boolean {
    if (!this.globFilter) return true;
    // grep prints a file's matches together: each file is matched against the glob once, not per line.
    if (path !== this.lastPath) {
      this.lastPath = path;
      this.lastPathPasses = passesGlobs(this.globFilter, path);
    }
    return this.lastPathPasses;
  }

  private countRest(chunk: Buffer, from: number): 'more' | 'enough' {
    for (let at = chunk.indexOf(0x0a, from); at !== -1; at = chunk.indexOf(0x0a, at + 1)) this.counted += 1;
    if (this.matches.length + this.counted <= SANDBOX_LIMITS.grepCountLimit) return 'more';
    this.countCapped = true;
    return 'enough';
  }
}

/** What the search found, sorted and cut to the limits, or why it stopped or failed. */
function grepAnswer(
  run: PipelineOutcome,
  collector: MatchCollector,
  call: { pattern: string; where: string; timeoutMs: number; resourceLimits: SandboxOptions['resourceLimits'] },
): ToolResult {
  const limits = SANDBOX_LIMITS;
  const { matches, binaryNotes, countCapped } = collector;
  const total = collector.total;
  const outcome = run.stages[0]!;
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
  if (run.timedOut && run.waitedForSlots) return errorResult(`grep ${slotWaitTimeout(call.timeoutMs)}`);
  if (outcome.limitExceeded)
    return errorResult(`grep: ${describeLimit(outcome.limitExceeded, call.resourceLimits)}`, fitOutput(body, notes).output);
  if (run.timedOut) {
    // Only matches that exist are called partial.
    const found = body ? 'the matches above are partial' : 'no match had been found by then';
    const message = `grep timed out after ${seconds(call.timeoutMs)} and was stopped; ${found}. Use a simpler pattern or a narrower path or glob.`;
    return errorResult(message, fitOutput(body, notes).output);
  }
  if (matches.length === 0) return noMatchAnswer(run, binaryNotes, call);
  const fitted = fitOutput(body, notes, (shownBody) => {
    const lines = shownBody ? shownBody.split('\n').length : 0;
    return `[output cut to ${limits.maxOutputChars} characters: ${lines} of ${shown.length} matches shown]`;
  });
  if (!more && !fitted.cut) return { status: 'ok', output: fitted.output };
  return { status: 'truncated', output: fitted.output, message: [fitted.cutNote, ...notes].filter(Boolean).join(' ') };
}

/** A search that ran to its end without a match: none, no file to search, or the program failed. */
function noMatchAnswer(run: PipelineOutcome, binaryNotes: string[], call: { pattern: string; where: string }): ToolResult {
  const outcome = run.stages[0]!;
  const exitCode = outcome.exitCode;
  if (outcome.stderr.includes('No files were searched')) {
    return { status: 'ok', output: `No matches for ${JSON.stringify(call.pattern)} in ${call.where}: no file there matches the glob.` };
  }
  if (exitCode === 2 || (exitCode !== 0 && exitCode !== 1 && !run.stoppedEarly)) {
    const detail = sanitizeText(outcome.stderr).text.trim().split('\n').slice(0, 6).join('\n');
    return errorResult(`grep failed: ${detail || `exit code ${exitCode}`}`);
  }
  const none = `No matches for ${JSON.stringify(call.pattern)} in ${call.where}.`;
  return { status: 'ok', output: binaryNotes.length ? `${none}\n${binaryNotes.join('\n')}` : none };
}

import type { GlobArgs, ToolResult } from '../../schemas/tools';
import { defaultEngine, engineExecutables, type SandboxOptions } from './engine';
import { compileGlob, passesGlobs, sortPaths } from './glob-match';
import { PAPER_LIMITS, SANDBOX_LIMITS } from './limits';
import { LineSplitter } from './line-splitter';
import { TimeSlice } from './time-slice';
import { fitOutput } from './output';
import { canonicalRoot } from './paths';
import { normalizeGlobPattern } from './glob-pattern';
import { globListingCache, type CapturedListing } from './glob-cache';
import { describeLimit, runPipeline, toolPlacement, type PipelineOutcome, type Stage } from './subprocess';
import { answerWithoutThrowing, displayPath, errorResult, seconds, slotWaitTimeout } from './tool-result';

function listStage(engine: 'rg' | 'grep', executable: string, glob: string): Stage {
  if (engine === 'rg') {
    return {
      executable,
      args: [
        '--no-config',
        '--files',
        '--null',
        '--hidden',
        '--no-ignore',
        '--sort=path',
        `--threads=${SANDBOX_LIMITS.maxSearchThreads}`,
        `--glob=${glob}`,
        // After every --glob (ripgrep applies --iglob last): `.git` stays out in any letter case.
        '--iglob=!.git',
      ],
    };
  }
  // find's -P default: symlinks are listed as links (and -type f drops them), never followed.
  return {
    executable,
    args: ['.', '-mindepth', '1', '(', '-iname', '.git', '-prune', ')', '-o', '-type', 'f', '-printf', '%P\\0'],
  };
}

/** Bytes of an already sorted listing kept for display: comfortably more than 4096 characters of paths. */
const HEAD_BYTES = 4 * PAPER_LIMITS.maxOutputChars;
/** Paths kept for display by the fallback: a 4096-character output shows at most 2048 ('a\n' each). */
const HEAD_FILES = PAPER_LIMITS.maxOutputChars;

interface Listing {
  push(chunk: Buffer): 'more' | 'enough';
  /** Resolves once every pushed record is judged, or `deadline` (epoch ms) passed (then false). */
  finish(deadline: number): Promise<boolean>;
  /** The first files in display order (at least a screenful when there are that many) and the total count. */
  result(): { head: string[]; total: number; capped: boolean };
}

/**
 * ripgrep --files --sort=path --null output arrives in display order: keep only its first HEAD_BYTES and
 * count the rest's NUL terminators natively, so a 100k-file listing costs a count, not 100k strings.
 */
class SortedListing implements Listing {
  private readonly head: Buffer[] = [];
  private headBytes = 0;
  private total = 0;
  private capped = false;

  push(chunk: Buffer): 'more' | 'enough' {
    if (this.headBytes < HEAD_BYTES) {
      this.head.push(Buffer.from(chunk));
      this.headBytes += chunk.length;
    }
    for (let at = chunk.indexOf(0); at !== -1; at = chunk.indexOf(0, at + 1)) this.total += 1;
    if (this.total >= SANDBOX_LIMITS.globListLimit) {
      this.capped = true;
      return 'enough';
    }
    return 'more';
  }

  async finish(): Promise<boolean> {
    return true;
  }

  result() {
    const records = Buffer.concat(this.head).toString('utf8').split('\0');
    records.pop(); // the text after the last NUL: empty, or a record cut at the head's end
    return { head: records.map(displayPath), total: this.total, capped: this.capped };
  }
}

/**
 * Paths read from find but not yet matched, at most this many characters: when matching falls this far
 * behind the listing, the listing is stopped (the result says so) instead of growing without bound.
 */
const MAX_PENDING_CHARS = 4 * 1024 * 1024;

/**
 * find's output (directory order) filtered by the glob in JS and sorted: the GNU fallback. The stream
 * callback only splits records and queues them; matching runs in a loop that yields to the event loop
 * every few milliseconds (TimeSlice), so a slow pattern over many long names never blocks other calls.
 */
class FilteredListing implements Listing {
  /** The first matches in display order, kept between HEAD_FILES and twice that (see keepFirst). */
  private readonly files: string[] = [];
  private total = 0;
  private capped = false;
  /** The listing was stopped because matching fell MAX_PENDING_CHARS behind it. */
  overran = false;
  private readonly splitter: LineSplitter;
  private pending: string[] = [];
  private pendingChars = 0;
  private draining: Promise<void> | null = null;
  private slice = new TimeSlice();

  constructor(private readonly keep: (file: string) => boolean) {
    this.splitter = new LineSplitter(
      SANDBOX_LIMITS.maxPathChars,
      (record) => {
        const file = displayPath(record.toString('utf8'));
        this.pending.push(file);
        this.pendingChars += file.length;
        return this.pendingChars > MAX_PENDING_CHARS ? 'enough' : 'more';
      },
      0x00,
    );
  }

  push(chunk: Buffer): 'more' | 'enough' {
    if (this.capped || this.overran) return 'enough';
    const more = this.splitter.push(chunk);
    if (more === 'enough') this.overran = true;
    this.draining ??= this.drain().finally(() => (this.draining = null));
    return more;
  }

  private async drain(): Promise<void> {
    while (this.pending.length > 0 && !this.capped) {
      const batch = this.pending;
      this.pending = [];
      for (const file of batch) {
        this.pendingChars -= file.length;
        if (!(await this.slice.pass())) return;
        if (this.capped || !this.keep(file)) continue;
        this.keepFirst(file);
        if (this.total >= SANDBOX_LIMITS.globListLimit) this.capped = true;
      }
    }
  }

  /**
   * Only a screenful is ever shown: the matches are counted, and only the first HEAD_FILES in display
   * order kept (sorting and cutting twice that many at a time), so no single sort of 100,000 paths
   * blocks the loop and memory stays small.
   */
  private keepFirst(file: string): void {
    this.total += 1;
    this.files.push(file);
    if (this.files.length >= 2 * HEAD_FILES) {
      sortPaths(this.files);
      this.files.length = HEAD_FILES;
    }
  }

  async finish(deadline: number): Promise<boolean> {
    if (!this.splitter.done) this.splitter.end();
    this.slice = new TimeSlice(deadline);
    while (this.draining || (this.pending.length > 0 && !this.capped)) {
      await (this.draining ?? (this.draining = this.drain().finally(() => (this.draining = null))));
      if (Date.now() > deadline) return false;
    }
    return true;
  }

  result() {
    return { head: sortPaths(this.files).slice(0, HEAD_FILES), total: this.total, capped: this.capped };
  }
}

/** ripgrep's listing as delivered, stopped where a SortedListing would stop, for every caller to replay. */
async function captureListing(
  stage: Stage,
  cwd: string,
  timeoutMs: number,
  signal: AbortSignal,
  isolation: SandboxOptions['isolation'],
): Promise<CapturedListing> {
  const chunks: Buffer[] = [];
  const counter = new SortedListing();
  const outcome = await runPipeline([stage], {
    cwd,
    placement: toolPlacement(cwd, isolation),
    timeoutMs,
    signal,
    onStdout: (chunk) => {
      chunks.push(Buffer.from(chunk));
      return counter.push(chunk);
    },
  });
  return { chunks, outcome };
}

/**
 * The glob tool (docs/design.md "Tools"): lists the repository's files whose path matches a gitignore-style glob, sorted
 * by path, repo-relative, in at most 4096 characters (with a marker saying how many were left out).
 * Symlinks are not listed or followed; `.git` is never listed. Never throws.
 */
export async function glob(root: string, args: GlobArgs, options: SandboxOptions = {}): Promise<ToolResult> {
  return answerWithoutThrowing('glob', () => globUnsafe(root, args, options));
}

async function globUnsafe(root: string, args: GlobArgs, options: SandboxOptions): Promise<ToolResult> {
  const calledAt = performance.now();
  const engine = options.engine ?? defaultEngine();
  const programs = engineExecutables(engine);
  if (!programs.ok) return errorResult(programs.message);
  const canonical = await canonicalRoot(root);
  if (!canonical.ok) return errorResult(canonical.message);
  if (typeof args.pattern !== 'string' || args.pattern.length === 0) return errorResult('glob: pattern must be a non-empty string');
  const normalized = normalizeGlobPattern(args.pattern, root, canonical.root);
  if (!normalized.ok) return errorResult(`glob: ${normalized.message}`);
  const compiled = compileGlob(normalized.pattern);
  if (!compiled.ok) return errorResult(`glob: ${compiled.message}`);

  const listing = engine === 'rg' ? new SortedListing() : new FilteredListing((file) => passesGlobs([compiled.glob], file));
  const timeoutMs = options.timeoutMs ?? SANDBOX_LIMITS.globTimeoutMs;
  const deadline = Date.now() + timeoutMs;
  const stage = listStage(engine, programs.list, normalized.pattern);
  const run = await runListing(stage, listing, { engine, root: canonical.root, pattern: normalized.pattern, timeoutMs, calledAt }, options);
  const outcome = run.stages[0]!;
  if (outcome.spawnError) return errorResult(`glob could not start ${engine}: ${outcome.spawnError}`);

  // A cancelled call answers at once; what was not matched yet does not matter then.
  const matchedInTime = run.aborted || (await listing.finish(deadline));
  if (!matchedInTime) run.timedOut = true;
  return globAnswer(run, listing, args.pattern, timeoutMs, options.resourceLimits);
}

/** Runs the listing program, its output going to `listing`; ripgrep's listing may come from the shared cache. */
async function runListing(
  stage: Stage,
  listing: Listing,
  call: { engine: 'rg' | 'grep'; root: string; pattern: string; timeoutMs: number; calledAt: number },
  options: SandboxOptions,
): Promise<PipelineOutcome> {
  const { root, timeoutMs } = call;
  if (call.engine === 'rg' && !options.resourceLimits && (options.isolation ?? 'namespace') === 'namespace') {
    // ripgrep's listing is shared by concurrent calls and remembered while the tree is unchanged (glob-cache.ts);
    // only isolated calls share it, so a filter-only call never answers from a run made another way.
    const captured = await globListingCache.listing(
      root,
      call.pattern,
      { signal: options.signal, timeoutMs, calledAt: call.calledAt },
      (signal, budgetMs) => captureListing(stage, root, budgetMs, signal, options.isolation),
    );
    for (const chunk of captured.chunks) if (listing.push(chunk) === 'enough') break;
    return captured.outcome;
  }
  return runPipeline([stage], {
    cwd: root,
    placement: toolPlacement(root, options.isolation),
    timeoutMs,
    signal: options.signal,
    ...(options.resourceLimits ? { resourceLimits: options.resourceLimits } : {}),
    onStdout: (chunk) => listing.push(chunk),
  });
}

/** The matching files, cut to the output limit, or why the listing stopped or failed. */
function globAnswer(
  run: PipelineOutcome,
  listing: Listing,
  pattern: string,
  timeoutMs: number,
  resourceLimits: SandboxOptions['resourceLimits'],
): ToolResult {
  const limits = SANDBOX_LIMITS;
  const outcome = run.stages[0]!;
  const overran = listing instanceof FilteredListing && listing.overran;
  const { head: files, total: count, capped: listCapped } = listing.result();
  const body = files.join('\n');
  const total = listCapped ? `more than ${limits.globListLimit}` : String(count);
  const fitted = fitOutput(body, [], (shownBody) => {
    const shown = shownBody ? shownBody.split('\n').length : 0;
    return `[output cut to ${limits.maxOutputChars} characters: ${shown} of ${total} matching files shown; use a narrower pattern]`;
  });
  if (run.aborted) return errorResult('glob was cancelled', fitted.output);
  if (run.timedOut && run.waitedForSlots) return errorResult(`glob ${slotWaitTimeout(timeoutMs)}`);
  if (outcome.limitExceeded) return errorResult(`glob: ${describeLimit(outcome.limitExceeded, resourceLimits)}`, fitted.output);
  if (run.timedOut) {
    const listed = body ? 'the list above is partial' : 'no matching file had been listed by then';
    return errorResult(`glob timed out after ${seconds(timeoutMs)} and was stopped; ${listed}`, fitted.output);
  }
  if (overran) {
    return errorResult(
      `glob: matching ${JSON.stringify(pattern)} fell too far behind the file listing, which was stopped; the list above is partial; use a simpler pattern`,
      fitted.output,
    );
  }
  if (files.length === 0) {
    const exitCode = outcome.exitCode;
    if (exitCode !== 0 && exitCode !== 1) {
      const detail = outcome.stderr.trim().split('\n').slice(0, 4).join('\n');
      return errorResult(`glob failed: ${detail || `exit code ${exitCode}`}`);
    }
    return {
      status: 'ok',
      output: `No files match ${JSON.stringify(pattern)} (patterns are relative to the repository root; a pattern without '/' matches at any depth).`,
    };
  }
  if (!fitted.cut && !listCapped && files.length === count) return { status: 'ok', output: fitted.output };
  return { status: 'truncated', output: fitted.output, message: fitted.cutNote ?? `[more than ${limits.globListLimit} files match]` };
}

import type { GlobArgs, ToolResult } from '../../schemas/tools';
import { defaultEngine, engineExecutables, type SandboxOptions } from './engine';
import { compileGlob, passesGlobs, sortPaths } from './glob-match';
import { PAPER_LIMITS, SANDBOX_LIMITS } from './limits';
import { LineSplitter } from './line-splitter';
import { fitOutput } from './output';
import { canonicalRoot } from './paths';
import { normalizeGlobPattern } from './glob-pattern';
import { globListingCache, type CapturedListing } from './glob-cache';
import { describeLimit, runPipeline, type PipelineOutcome, type Stage } from './subprocess';
import { displayPath, errorResult, seconds, slotWaitTimeout } from './tool-result';

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
        '--glob=!.git',
      ],
    };
  }
  // find's -P default: symlinks are listed as links (and -type f drops them), never followed.
  return {
    executable,
    args: ['.', '-mindepth', '1', '(', '-name', '.git', '-prune', ')', '-o', '-type', 'f', '-printf', '%P\\0'],
  };
}

/** Bytes of an already sorted listing kept for display: comfortably more than 4096 characters of paths. */
const HEAD_BYTES = 4 * PAPER_LIMITS.maxOutputChars;

interface Listing {
  push(chunk: Buffer): 'more' | 'enough';
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

  result() {
    const records = Buffer.concat(this.head).toString('utf8').split('\0');
    records.pop(); // the text after the last NUL: empty, or a record cut at the head's end
    return { head: records.map(displayPath), total: this.total, capped: this.capped };
  }
}

/** find's output (directory order) filtered by the glob in JS and sorted: the GNU fallback. */
class FilteredListing implements Listing {
  private readonly files: string[] = [];
  private capped = false;
  private readonly splitter: LineSplitter;

  constructor(keep: (file: string) => boolean) {
    this.splitter = new LineSplitter(
      SANDBOX_LIMITS.maxPathChars,
      (record) => {
        const file = displayPath(record.toString('utf8'));
        if (!keep(file)) return 'more';
        this.files.push(file);
        if (this.files.length < SANDBOX_LIMITS.globListLimit) return 'more';
        this.capped = true;
        return 'enough';
      },
      0x00,
    );
  }

  push(chunk: Buffer): 'more' | 'enough' {
    return this.splitter.push(chunk);
  }

  result() {
    if (!this.splitter.done) this.splitter.end();
    return { head: sortPaths(this.files), total: this.files.length, capped: this.capped };
  }
}

/** ripgrep's listing as delivered, stopped where a SortedListing would stop, for every caller to replay. */
async function captureListing(stage: Stage, cwd: string, timeoutMs: number, signal: AbortSignal): Promise<CapturedListing> {
  const chunks: Buffer[] = [];
  const counter = new SortedListing();
  const outcome = await runPipeline([stage], {
    cwd,
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
 * The glob tool (SPEC §5): lists the repository's files whose path matches a gitignore-style glob, sorted
 * by path, repo-relative, in at most 4096 characters (with a marker saying how many were left out).
 * Symlinks are not listed or followed; `.git` is never listed. Never throws.
 */
export async function glob(root: string, args: GlobArgs, options: SandboxOptions = {}): Promise<ToolResult> {
  try {
    return await globUnsafe(root, args, options);
  } catch (error) {
    return errorResult(`glob failed: ${error instanceof Error ? error.message : String(error)}`);
  }
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

  const limits = SANDBOX_LIMITS;
  const listing = engine === 'rg' ? new SortedListing() : new FilteredListing((file) => passesGlobs([compiled.glob], file));
  const timeoutMs = options.timeoutMs ?? limits.globTimeoutMs;
  const stage = listStage(engine, programs.list, normalized.pattern);
  let run: PipelineOutcome;
  if (engine === 'rg' && !options.resourceLimits) {
    // ripgrep's listing is shared by concurrent calls and remembered while the tree is unchanged (glob-cache.ts).
    const captured = await globListingCache.listing(
      canonical.root,
      normalized.pattern,
      { signal: options.signal, timeoutMs, calledAt },
      (signal, budgetMs) => captureListing(stage, canonical.root, budgetMs, signal),
    );
    for (const chunk of captured.chunks) if (listing.push(chunk) === 'enough') break;
    run = captured.outcome;
  } else {
    run = await runPipeline([stage], {
      cwd: canonical.root,
      timeoutMs,
      signal: options.signal,
      ...(options.resourceLimits ? { resourceLimits: options.resourceLimits } : {}),
      onStdout: (chunk) => listing.push(chunk),
    });
  }
  const outcome = run.stages[0]!;
  if (outcome.spawnError) return errorResult(`glob could not start ${engine}: ${outcome.spawnError}`);

  const { head: files, total: count, capped: listCapped } = listing.result();
  const body = files.join('\n');
  const total = listCapped ? `more than ${limits.globListLimit}` : String(count);
  const fitted = fitOutput(body, [], (shownBody) => {
    const shown = shownBody ? shownBody.split('\n').length : 0;
    return `[output cut to ${limits.maxOutputChars} characters: ${shown} of ${total} matching files shown; use a narrower pattern]`;
  });
  if (run.aborted) return errorResult('glob was cancelled', fitted.output);
  if (run.timedOut && run.waitedForSlots) return errorResult(`glob ${slotWaitTimeout(timeoutMs)}`);
  if (outcome.limitExceeded) return errorResult(`glob: ${describeLimit(outcome.limitExceeded, options.resourceLimits)}`, fitted.output);
  if (run.timedOut) {
    return errorResult(`glob timed out after ${seconds(timeoutMs)} and was stopped; the list above is partial`, fitted.output);
  }
  if (files.length === 0) {
    const exitCode = outcome.exitCode;
    if (exitCode !== 0 && exitCode !== 1) {
      const detail = outcome.stderr.trim().split('\n').slice(0, 4).join('\n');
      return errorResult(`glob failed: ${detail || `exit code ${exitCode}`}`);
    }
    return {
      status: 'ok',
      output: `No files match ${JSON.stringify(args.pattern)} (patterns are relative to the repository root; a pattern without '/' matches at any depth).`,
    };
  }
  if (!fitted.cut && !listCapped && files.length === count) return { status: 'ok', output: fitted.output };
  return { status: 'truncated', output: fitted.output, message: fitted.cutNote ?? `[more than ${limits.globListLimit} files match]` };
}

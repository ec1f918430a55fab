import { promises as fs } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import type { ReadArgs, ToolResult } from '../../schemas/tools';
import type { SandboxOptions } from './engine';
import { SANDBOX_LIMITS } from './limits';
import { fitOutput, sanitizeText } from './output';
import { guardPath } from './paths';
import { findExecutable } from './executables';
import { describeLimit, runPipeline, toolPlacement, type PipelineOutcome } from './subprocess';
import { answerWithoutThrowing, displayPath, errorResult, seconds, slotWaitTimeout } from './tool-result';

/** Characters of file text per read: the 4096-character output limit less room for the marker line. */
const BODY_BUDGET = SANDBOX_LIMITS.maxOutputChars - 160;

interface Collected {
  lines: Array<{ number: number; text: string }>;
  /** The last line number seen (the file's line count when `eof`). */
  lastLine: number;
  /** The whole file was read. */
  eof: boolean;
  /** Reading stopped after line `end` and the file has more after it. */
  moreAfter: boolean;
  /** The character budget ran out before the requested range was complete. */
  budgetHit: boolean;
  /** A NUL byte was met at this line: the rest is binary and was not read. */
  binaryAtLine?: number;
  timedOut: boolean;
  aborted: boolean;
}

/**
 * Takes the file's bytes in the order `cat` writes them and says 'enough' as soon as the requested lines
 * are collected, the character budget is spent or a NUL byte is met (the pipeline then kills `cat`): a 1 GB
 * file costs what is needed, never a whole read, and at most one budget of any single line is held in memory.
 */
class LineCollector {
  readonly out: Collected = { lines: [], lastLine: 0, eof: false, moreAfter: false, budgetHit: false, timedOut: false, aborted: false };
  private readonly decoder = new StringDecoder('utf8');
  private position = 0;
  private lineNumber = 1;
  private current = '';
  private currentFull = 0; // characters of the current line, including the ones not kept
  private used = 0;
  private stopped = false;

  constructor(
    private readonly size: number,
    private readonly start: number,
    private readonly end: number,
    private readonly charBudget: number,
  ) {}

  /** Ends the current line; false when reading should stop. */
  private finishLine(complete: boolean): boolean {
    const out = this.out;
    if (this.lineNumber >= this.start) {
      const text = sanitizeText(this.current.replace(/\r$/, '')).text;
      const cut = !complete
        ? ' …[line cut]'
        : this.currentFull > this.current.length
          ? ` …[line cut, ${this.currentFull - this.current.length} more characters]`
          : '';
      const cost = String(this.lineNumber).length + 1 + text.length + cut.length + 1;
      if (this.used + cost > this.charBudget && out.lines.length > 0) {
        out.budgetHit = true;
        return false;
      }
      out.lines.push({ number: this.lineNumber, text: text + cut });
      this.used += cost;
      if (!complete) {
        out.budgetHit = true;
        return false;
      }
    }
    out.lastLine = this.lineNumber;
    this.lineNumber += 1;
    this.current = '';
    this.currentFull = 0;
    return this.lineNumber <= this.end;
  }

  push(chunk: Buffer): 'more' | 'enough' {
    if (this.stopped) return 'enough';
    this.stopped = this.take(chunk);
    return this.stopped ? 'enough' : 'more';
  }

  /** True when reading should stop. */
  private take(chunk: Buffer): boolean {
    this.position += chunk.length;
    const nul = chunk.indexOf(0);
    const text = this.decoder.write(nul === -1 ? chunk : chunk.subarray(0, nul));
    let from = 0;
    for (;;) {
      const newline = text.indexOf('\n', from);
      const pieceEnd = newline === -1 ? text.length : newline;
      if (this.lineNumber >= this.start) {
        const room = this.charBudget - this.current.length;
        if (room > 0) this.current += text.slice(from, from + Math.min(room, pieceEnd - from));
      }
      this.currentFull += pieceEnd - from;
      if (newline === -1) {
        // A line in range that already fills the whole budget will not be shown further: stop reading it.
        if (this.lineNumber >= this.start && this.current.length >= this.charBudget && nul === -1) {
          this.finishLine(false);
          return true;
        }
        break;
      }
      if (!this.finishLine(true)) {
        this.out.moreAfter = !this.out.budgetHit && (newline + 1 < text.length || this.position < this.size);
        return true;
      }
      from = newline + 1;
    }
    if (nul !== -1) {
      this.out.binaryAtLine = this.lineNumber;
      return true;
    }
    return false;
  }

  /** The whole file was read (`cat` exited 0 without being stopped): the last line may lack its newline. */
  finish(): void {
    if (this.stopped) return;
    const rest = this.decoder.end();
    this.current += rest;
    this.currentFull += rest.length;
    if (this.currentFull > 0) this.finishLine(true);
    this.out.eof = true;
  }
}

/**
 * The read tool (docs/design.md "Tools"): shows a text file of the worktree with line numbers, lines [start_line,
 * end_line] (default: from line 1), at most 200 lines and 4096 characters, with a marker saying how to
 * continue. The bytes come from `cat` run in the tool sandbox (lib/sandbox/namespace.ts), which holds the
 * worktree and nothing else, so no path can reach outside it whatever the guard decided; `cat` is stopped as
 * soon as the lines are collected. Binary files (a NUL byte, or mostly holes) are refused; only regular
 * files are read. Bounded by the 5 s read timeout. Never throws.
 */
export async function read(root: string, args: ReadArgs, options: SandboxOptions = {}): Promise<ToolResult> {
  return answerWithoutThrowing('read', () => readUnsafe(root, args, options));
}

async function readUnsafe(root: string, args: ReadArgs, options: SandboxOptions): Promise<ToolResult> {
  // The deadline is the call's: the wait for a permit is part of the 5 s, and so is a cancellation.
  const timeoutMs = options.timeoutMs ?? SANDBOX_LIMITS.readTimeoutMs;
  const deadline = Date.now() + timeoutMs;
  const range = lineRange(args);
  if (typeof range === 'string') return errorResult(range);
  const target = await readTarget(root, args.path);
  if (!target.ok) return target.refused;

  const cat = findExecutable('cat');
  if (!cat) return errorResult('read: cat is not installed on this machine');
  const collector = new LineCollector(target.size, range.start, range.end, BODY_BUDGET);
  const run = await runCat(cat, target, collector, { timeoutMs, deadline }, options);
  const outcome = run.stages[0]!;
  if (outcome.spawnError) return errorResult(`read could not start cat: ${outcome.spawnError}`);
  if (run.waitedForSlots) {
    return errorResult(run.aborted ? 'read was cancelled' : `read ${slotWaitTimeout(timeoutMs)}`);
  }
  const collected = collector.out;
  if (run.aborted) collected.aborted = true;
  else if (run.timedOut) collected.timedOut = true;
  else if (!run.stoppedEarly) {
    if (outcome.limitExceeded) return errorResult(`read: ${describeLimit(outcome.limitExceeded, options.resourceLimits)}`);
    // The file went away (or became unreadable) between the guard and cat: the same answer as a missing file.
    if (outcome.exitCode !== 0) return errorResult(`read: no such file or directory: ${JSON.stringify(args.path)}`);
    collector.finish();
  }
  return readAnswer(collected, range, target.shownPath, args.end_line, timeoutMs);
}

interface LineRange {
  start: number;
  /** The last line this read shows: the one asked for, or fewer (at most maxReadLines per read). */
  end: number;
  /** The last line asked for (MAX_SAFE_INTEGER: to the end of the file). */
  requestedEnd: number;
}

/** The lines to show; a string: why start_line or end_line is refused. */
function lineRange(args: ReadArgs): LineRange | string {
  const start = args.start_line ?? 1;
  if (!Number.isInteger(start) || start < 1) return 'read: start_line must be an integer ≥ 1';
  if (args.end_line !== undefined && (!Number.isInteger(args.end_line) || args.end_line < start)) {
    return 'read: end_line must be an integer ≥ start_line';
  }
  const requestedEnd = args.end_line ?? Number.MAX_SAFE_INTEGER;
  return { start, end: Math.min(requestedEnd, start + SANDBOX_LIMITS.maxReadLines - 1), requestedEnd };
}

type ReadTarget = { ok: true; root: string; relative: string; shownPath: string; size: number } | { ok: false; refused: ToolResult };

/** The file the guard let through, if it is a regular file worth reading (a huge sparse file is not). */
async function readTarget(root: string, userPath: string): Promise<ReadTarget> {
  const refused = (message: string): ReadTarget => ({ ok: false, refused: errorResult(message) });
  const target = await guardPath(root, userPath, { gitControlData: 'missing' });
  if (!target.ok) return refused(`read: ${target.message}`);
  const shownPath = displayPath(target.relative);
  if (target.kind === 'directory') {
    return refused(`read: ${shownPath} is a directory; use glob (e.g. "${shownPath === '.' ? '' : `${shownPath}/`}*") to list it`);
  }
  if (target.kind !== 'file') return refused(`read: ${shownPath} is not a regular file`);
  const stat = await fs.stat(target.absolute);
  if (stat.size >= 1024 * 1024 && stat.blocks * 512 < stat.size / 2) {
    return refused(`read: ${shownPath} is a sparse file (${stat.size} bytes, mostly holes); not shown`);
  }
  return { ok: true, root: target.root, relative: target.relative, shownPath, size: stat.size };
}

/** Runs `cat` on the file in the tool sandbox, its output going to the collector, which stops it when it has the lines. */
function runCat(
  cat: string,
  target: { root: string; relative: string },
  collector: LineCollector,
  timing: { timeoutMs: number; deadline: number },
  options: SandboxOptions,
): Promise<PipelineOutcome> {
  // The guard's canonical relative path: no symlink left in it, and never read as a flag.
  return runPipeline([{ executable: cat, args: ['--', target.relative] }], {
    cwd: target.root,
    timeoutMs: Math.max(1, timing.deadline - Date.now()),
    // Once `cat` is started it gets the whole read timeout again, whatever the wait for its permit left: on a
    // saturated machine (64 searches queued) the permit can come just before the deadline, and a small file
    // must still be read then (the promise the in-process read kept by always reading its first chunk).
    minRunMs: timing.timeoutMs,
    signal: options.signal,
    placement: toolPlacement(target.root, options.isolation),
    ...(options.resourceLimits ? { resourceLimits: options.resourceLimits } : {}),
    onStdout: (chunk) => collector.push(chunk),
  });
}

/** The numbered lines collected, or why there are none, with a note saying how to go on when they stop short. */
function readAnswer(collected: Collected, range: LineRange, shownPath: string, endLine: number | undefined, timeoutMs: number): ToolResult {
  const start = range.start;
  if (collected.binaryAtLine !== undefined && collected.lines.length === 0) {
    return errorResult(
      collected.binaryAtLine <= 1 && start <= 1
        ? `read: ${shownPath} is a binary file; read shows text files only`
        : `read: ${shownPath} has binary data (a NUL byte) at line ${collected.binaryAtLine}; not shown`,
    );
  }
  const width = String(collected.lines.at(-1)?.number ?? start).length;
  const body = collected.lines.map((l) => `${String(l.number).padStart(width)}\t${l.text}`).join('\n');

  if (collected.aborted) return errorResult('read was cancelled', fitOutput(body).output);
  if (collected.timedOut) {
    return errorResult(
      `read timed out after ${seconds(timeoutMs)} before reaching line ${start}; the file is too large to scan that far`,
      fitOutput(body).output,
    );
  }
  if (collected.lines.length === 0) {
    return errorResult(`read: start_line ${start} is past the end of ${shownPath} (${collected.lastLine} lines)`);
  }

  const notes: string[] = [];
  const truncatedNote = stoppedShortNote(collected, range);
  if (!truncatedNote && collected.eof && endLine !== undefined && endLine > collected.lastLine) {
    notes.push(`[end of file: ${shownPath} has ${collected.lastLine} lines]`);
  }
  if (truncatedNote) notes.push(truncatedNote);
  const fitted = fitOutput(body, notes);
  if (!truncatedNote && !fitted.cut) return { status: 'ok', output: fitted.output };
  return { status: 'truncated', output: fitted.output, message: [fitted.cutNote, truncatedNote].filter(Boolean).join(' ') };
}

/** Why the lines shown stop before those asked for (binary data, the character budget, the line limit), or undefined. */
function stoppedShortNote(collected: Collected, range: LineRange): string | undefined {
  const first = collected.lines[0]?.number;
  const last = collected.lines.at(-1)?.number;
  if (collected.binaryAtLine !== undefined) {
    return `[binary data (a NUL byte) at line ${collected.binaryAtLine}; the rest of the file is not shown]`;
  }
  if (collected.budgetHit) {
    return `[showing lines ${first}-${last}: the ${SANDBOX_LIMITS.maxOutputChars}-character limit; continue with start_line=${last! + 1}]`;
  }
  if (collected.moreAfter && range.end < range.requestedEnd) {
    return `[showing lines ${first}-${last}: at most ${SANDBOX_LIMITS.maxReadLines} lines per read; continue with start_line=${last! + 1}]`;
  }
  return undefined;
}

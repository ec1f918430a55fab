import { constants, promises as fs } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import type { ReadArgs, ToolResult } from '../../schemas/tools';
import type { SandboxOptions } from './engine';
import { SANDBOX_LIMITS } from './limits';
import { fitOutput, sanitizeText } from './output';
import { guardPath } from './paths';
import { PermitWaitError, subprocessSlots } from './semaphore';
import { displayPath, errorResult, seconds, slotWaitTimeout } from './tool-result';

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
 * Streams the file from the start in fixed chunks and stops as soon as the requested lines are collected,
 * the character budget is spent, a NUL byte is met or the deadline passes: a 1 GB file costs what is
 * needed, never a whole read, and at most one budget of any single line is held in memory.
 */
async function collectLines(
  handle: fs.FileHandle,
  size: number,
  start: number,
  end: number,
  charBudget: number,
  deadline: number,
  signal: AbortSignal | undefined,
): Promise<Collected> {
  const out: Collected = {
    lines: [],
    lastLine: 0,
    eof: false,
    moreAfter: false,
    budgetHit: false,
    timedOut: false,
    aborted: false,
  };
  const decoder = new StringDecoder('utf8');
  const buffer = Buffer.alloc(SANDBOX_LIMITS.readChunkBytes);
  let position = 0;
  let lineNumber = 1;
  let current = '';
  let currentFull = 0; // characters of the current line, including the ones not kept
  let used = 0;

  /** Ends the current line; false when reading should stop. */
  const finishLine = (complete: boolean): boolean => {
    if (lineNumber >= start) {
      const text = sanitizeText(current.replace(/\r$/, '')).text;
      const cut = !complete
        ? ' …[line cut]'
        : currentFull > current.length
          ? ` …[line cut, ${currentFull - current.length} more characters]`
          : '';
      const cost = String(lineNumber).length + 1 + text.length + cut.length + 1;
      if (used + cost > charBudget && out.lines.length > 0) {
        out.budgetHit = true;
        return false;
      }
      out.lines.push({ number: lineNumber, text: text + cut });
      used += cost;
      if (!complete) {
        out.budgetHit = true;
        return false;
      }
    }
    out.lastLine = lineNumber;
    lineNumber += 1;
    current = '';
    currentFull = 0;
    return lineNumber <= end;
  };

  for (;;) {
    if (signal?.aborted) {
      out.aborted = true;
      return out;
    }
    // The first chunk is always read: a file that fits in it is never "too large" because the loop was
    // busy (or the permit came late); only a scan that needs more chunks is bounded by the deadline.
    if (position > 0 && Date.now() > deadline) {
      out.timedOut = true;
      return out;
    }
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
    if (bytesRead === 0) break;
    position += bytesRead;
    const chunk = buffer.subarray(0, bytesRead);
    const nul = chunk.indexOf(0);
    const text = decoder.write(nul === -1 ? chunk : chunk.subarray(0, nul));
    let from = 0;
    for (;;) {
      const newline = text.indexOf('\n', from);
      const pieceEnd = newline === -1 ? text.length : newline;
      if (lineNumber >= start) {
        const room = charBudget - current.length;
        if (room > 0) current += text.slice(from, from + Math.min(room, pieceEnd - from));
      }
      currentFull += pieceEnd - from;
      if (newline === -1) {
        // A line in range that already fills the whole budget will not be shown further: stop reading it.
        if (lineNumber >= start && current.length >= charBudget && nul === -1) {
          finishLine(false);
          return out;
        }
        break;
      }
      if (!finishLine(true)) {
        out.moreAfter = !out.budgetHit && (newline + 1 < text.length || position < size);
        return out;
      }
      from = newline + 1;
    }
    if (nul !== -1) {
      out.binaryAtLine = lineNumber;
      return out;
    }
  }
  const rest = decoder.end();
  current += rest;
  currentFull += rest.length;
  if (currentFull > 0) finishLine(true);
  out.eof = true;
  return out;
}

/**
 * The read tool (SPEC §5): shows a text file of the worktree with line numbers, lines [start_line,
 * end_line] (default: from line 1), at most 200 lines and 4096 characters, with a marker saying how to
 * continue. Binary files (a NUL byte, or mostly holes) are refused without being read; only regular files
 * are opened, with O_NOFOLLOW|O_NONBLOCK. Bounded by the 5 s read timeout. Never throws.
 */
export async function read(root: string, args: ReadArgs, options: SandboxOptions = {}): Promise<ToolResult> {
  // The deadline is the call's: the wait for a permit is part of the 5 s, and so is a cancellation.
  const timeoutMs = options.timeoutMs ?? SANDBOX_LIMITS.readTimeoutMs;
  const deadline = Date.now() + timeoutMs;
  let release: () => void;
  try {
    release = await subprocessSlots.acquire(1, { deadline, ...(options.signal ? { signal: options.signal } : {}) });
  } catch (error) {
    if (error instanceof PermitWaitError) {
      return errorResult(error.reason === 'aborted' ? 'read was cancelled' : `read ${slotWaitTimeout(timeoutMs)}`);
    }
    return errorResult(`read failed: ${error instanceof Error ? error.message : String(error)}`);
  }
  try {
    return await readUnsafe(root, args, options, deadline, timeoutMs);
  } catch (error) {
    return errorResult(`read failed: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    release();
  }
}

async function readUnsafe(root: string, args: ReadArgs, options: SandboxOptions, deadline: number, timeoutMs: number): Promise<ToolResult> {
  const limits = SANDBOX_LIMITS;
  const start = args.start_line ?? 1;
  if (!Number.isInteger(start) || start < 1) return errorResult('read: start_line must be an integer ≥ 1');
  if (args.end_line !== undefined && (!Number.isInteger(args.end_line) || args.end_line < start)) {
    return errorResult('read: end_line must be an integer ≥ start_line');
  }
  const requestedEnd = args.end_line ?? Number.MAX_SAFE_INTEGER;
  const end = Math.min(requestedEnd, start + limits.maxReadLines - 1);

  const target = await guardPath(root, args.path);
  if (!target.ok) return errorResult(`read: ${target.message}`);
  const shownPath = displayPath(target.relative);
  if (target.kind === 'directory') {
    return errorResult(`read: ${shownPath} is a directory; use glob (e.g. "${shownPath === '.' ? '' : `${shownPath}/`}*") to list it`);
  }
  if (target.kind !== 'file') return errorResult(`read: ${shownPath} is not a regular file`);

  const handle = await fs.open(target.absolute, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  let collected: Collected;
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) return errorResult(`read: ${shownPath} is not a regular file`);
    if (stat.size >= 1024 * 1024 && stat.blocks * 512 < stat.size / 2) {
      return errorResult(`read: ${shownPath} is a sparse file (${stat.size} bytes, mostly holes); not shown`);
    }
    collected = await collectLines(handle, stat.size, start, end, BODY_BUDGET, deadline, options.signal);
  } finally {
    await handle.close();
  }

  if (collected.binaryAtLine !== undefined && collected.lines.length === 0) {
    return errorResult(
      collected.binaryAtLine <= 1 && start <= 1
        ? `read: ${shownPath} is a binary file; read shows text files only`
        : `read: ${shownPath} has binary data (a NUL byte) at line ${collected.binaryAtLine}; not shown`,
    );
  }
  const width = String(collected.lines.at(-1)?.number ?? start).length;
  const body = collected.lines.map((l) => `${String(l.number).padStart(width)}\t${l.text}`).join('\n');
  const first = collected.lines[0]?.number;
  const last = collected.lines.at(-1)?.number;

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
  let truncatedNote: string | undefined;
  if (collected.binaryAtLine !== undefined) {
    truncatedNote = `[binary data (a NUL byte) at line ${collected.binaryAtLine}; the rest of the file is not shown]`;
  } else if (collected.budgetHit) {
    truncatedNote = `[showing lines ${first}-${last}: the ${limits.maxOutputChars}-character limit; continue with start_line=${last! + 1}]`;
  } else if (collected.moreAfter && end < requestedEnd) {
    truncatedNote = `[showing lines ${first}-${last}: at most ${limits.maxReadLines} lines per read; continue with start_line=${last! + 1}]`;
  } else if (collected.eof && args.end_line !== undefined && args.end_line > collected.lastLine) {
    notes.push(`[end of file: ${shownPath} has ${collected.lastLine} lines]`);
  }
  if (truncatedNote) notes.push(truncatedNote);
  const fitted = fitOutput(body, notes);
  if (!truncatedNote && !fitted.cut) return { status: 'ok', output: fitted.output };
  return { status: 'truncated', output: fitted.output, message: [fitted.cutNote, truncatedNote].filter(Boolean).join(' ') };
}

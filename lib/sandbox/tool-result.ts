import type { ToolResult } from '../../schemas/tools';
import { replaceUnsafeChars } from './output';

export function errorResult(message: string, output = ''): ToolResult {
  return { status: 'error', output, message };
}

/** The error result of a tool call that threw: the tool's name and what went wrong. */
export function failureResult(tool: string, error: unknown): ToolResult {
  return errorResult(`${tool} failed: ${error instanceof Error ? error.message : String(error)}`);
}

/** A tool's answer that never throws: whatever `call` throws comes back as its failureResult. */
export async function answerWithoutThrowing(tool: string, call: () => Promise<ToolResult>): Promise<ToolResult> {
  try {
    return await call();
  } catch (error) {
    return failureResult(tool, error);
  }
}

export function seconds(ms: number): string {
  if (ms % 1000 === 0) return `${ms / 1000} s`;
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/**
 * A path as shown to the model: control characters (a newline in a file name) cannot break the layout, and
 * bidi or invisible characters cannot disguise a name (output.ts UNSAFE_CHARS); each becomes '?', as in ls.
 */
export function displayPath(relative: string): string {
  const clean = replaceUnsafeChars(relative, '?', true);
  return clean.startsWith('./') ? clean.slice(2) : clean;
}

/** A call whose whole budget went on waiting for a subprocess slot (the global limit was saturated). */
export function slotWaitTimeout(timeoutMs: number): string {
  return `timed out after ${seconds(timeoutMs)} waiting for a free subprocess slot (too many tool calls at once); nothing was run, try again`;
}

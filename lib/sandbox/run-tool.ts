import type { z } from 'zod';
import { TOOL_ARGS_SCHEMAS, ToolNameSchema, type ToolName, type ToolResult } from '../../schemas/tools';
import type { SandboxOptions } from './engine';
import { glob } from './glob';
import { probeNamespace, sandboxUnavailableMessage } from './namespace';
import { grep } from './grep';
import { read } from './read';
import { terminal } from './terminal';
import { errorResult, failureResult } from './tool-result';

function describeIssues(name: ToolName, error: z.ZodError): string {
  const issues = error.issues.slice(0, 5).map((issue) => {
    const where = issue.path.length ? issue.path.join('.') : 'arguments';
    return `${where}: ${issue.message}`;
  });
  return `invalid arguments for ${name}: ${issues.join('; ')}`;
}

/**
 * Runs one tool call from the model inside the worktree `root`. `rawArgs` is what the model sent: the JSON
 * string of an OpenAI tool call or an already-parsed object; keys whose value is null are treated as absent
 * (models often send "path": null for an optional argument). Unknown tools, unparsable JSON and arguments
 * that fail the schema all come back as error observations; this never throws.
 */
export async function runTool(root: string, name: string, rawArgs: unknown, options: SandboxOptions = {}): Promise<ToolResult> {
  const tool = ToolNameSchema.safeParse(name);
  if (!tool.success) {
    return errorResult(`unknown tool ${JSON.stringify(name)}; available tools: ${ToolNameSchema.options.join(', ')}`);
  }
  let args: unknown = rawArgs;
  if (typeof rawArgs === 'string') {
    try {
      args = rawArgs.trim() === '' ? {} : JSON.parse(rawArgs);
    } catch (error) {
      return errorResult(`arguments for ${tool.data} are not valid JSON: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  if (args === null || args === undefined) args = {};
  if (typeof args !== 'object' || Array.isArray(args)) {
    return errorResult(`arguments for ${tool.data} must be a JSON object`);
  }
  const withoutNulls = Object.fromEntries(Object.entries(args as Record<string, unknown>).filter(([, v]) => v !== null));
  // Isolation asked for (the default) and not available here: no tool runs unisolated instead.
  if ((options.isolation ?? 'namespace') === 'namespace') {
    const probe = await probeNamespace();
    if (!probe.ok) return errorResult(`${tool.data}: ${sandboxUnavailableMessage(probe.reason)}`);
  }

  return answerAbortPromptly(tool.data, options.signal, () => dispatch(tool.data, root, withoutNulls, options));
}

const CANCELLED: Record<ToolName, string> = {
  grep: 'grep was cancelled',
  glob: 'glob was cancelled',
  read: 'read was cancelled',
  terminal: 'terminal: the command was cancelled',
};

/**
 * The call's answer, or a cancellation as soon as `signal` fires, whatever the call is doing then
 * (waiting for a permit, for the file system's thread pool, or for killed processes to be reaped). The
 * abandoned call still finishes its own cleanup: its process groups are killed by the same signal and its
 * permits come back when they have exited.
 */
function answerAbortPromptly(name: ToolName, signal: AbortSignal | undefined, call: () => Promise<ToolResult>): Promise<ToolResult> {
  if (!signal) return call();
  if (signal.aborted) return Promise.resolve(errorResult(CANCELLED[name]));
  return new Promise((resolve) => {
    const onAbort = () => resolve(errorResult(CANCELLED[name]));
    signal.addEventListener('abort', onAbort, { once: true });
    call().then(
      (result) => {
        signal.removeEventListener('abort', onAbort);
        resolve(result);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        resolve(failureResult(name, error));
      },
    );
  });
}

type ToolArgs<N extends ToolName> = z.infer<(typeof TOOL_ARGS_SCHEMAS)[N]>;

/** Each tool's argument schema and entry point, by name, typed so that a name's schema feeds its own tool. */
const SCHEMAS: { [N in ToolName]: z.ZodType<ToolArgs<N>> } = TOOL_ARGS_SCHEMAS;
const TOOLS: { [N in ToolName]: (root: string, args: ToolArgs<N>, options: SandboxOptions) => Promise<ToolResult> } = {
  grep,
  glob,
  read,
  terminal,
};

/** Runs the tool on its arguments once they pass its schema; arguments that fail it are an error result. */
async function dispatch<N extends ToolName>(
  name: N,
  root: string,
  withoutNulls: Record<string, unknown>,
  options: SandboxOptions,
): Promise<ToolResult> {
  const parsed = SCHEMAS[name].safeParse(withoutNulls);
  return parsed.success ? TOOLS[name](root, parsed.data, options) : errorResult(describeIssues(name, parsed.error));
}

/**
 * The text the model sees for a result: the output (which already carries any truncation marker), then, for
 * an error, the message. Kept to 4096 + message characters by construction of the tools.
 */
export function formatObservation(result: ToolResult): string {
  if (result.status !== 'error') return result.output;
  const message = `Error: ${result.message ?? 'the tool failed'}`;
  return result.output ? `${result.output}\n${message}` : message;
}

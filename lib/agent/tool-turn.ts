import { LOCALIZATION_FINISH_TOOL_NAME, type ChatMessage } from '../../schemas/agent';
import type { ToolResult } from '../../schemas/tools';
import { formatObservation, type SandboxOptions } from '../sandbox';
import type { PendingCall } from './assistant-turn';
import { droppedCallNotice } from './prompts';
import { toolObservationMessage } from './qwen3-format';

/**
 * Runs the tool calls of one turn (docs/design.md "Tools"): the first `maxToolCallsPerTurn` concurrently, in the
 * worktree's sandbox; each further call gets an observation saying it was not run. A call that cannot run (an
 * unreadable block, a tool not offered, a runner that throws) gets an error observation; nothing throws.
 */

export type ToolRunner = (root: string, name: string, rawArgs: unknown, options?: SandboxOptions) => Promise<ToolResult>;

export interface ToolTurnContext {
  /** The worktree every tool runs in. */
  root: string;
  sandbox: SandboxOptions;
  runner: ToolRunner;
  /** The sandbox tools offered to the model. */
  offered: ReadonlySet<string>;
  /** Every tool name the model was shown, for the unknown-tool observation. */
  availableList: string;
  maxToolCallsPerTurn: number;
}

export interface ToolTurnOutcome {
  /** One `tool` message per call, in the order of the calls. */
  observations: ChatMessage[];
  executed: number;
  dropped: number;
  /** Calls run whose observation is an error. */
  failed: number;
}

function errorObservation(message: string): string {
  return formatObservation({ status: 'error', output: '', message });
}

async function runCall(call: PendingCall, context: ToolTurnContext): Promise<{ message: ChatMessage; failed: boolean }> {
  const name = call.name === '' ? undefined : call.name;
  const reply = (content: string, failed: boolean) => ({
    message: toolObservationMessage({ toolCallId: call.id, ...(name === undefined ? {} : { name }), content }),
    failed,
  });
  if (call.malformed !== undefined) return reply(errorObservation(call.malformed), true);
  if (call.name === LOCALIZATION_FINISH_TOOL_NAME || !context.offered.has(call.name)) {
    return reply(errorObservation(`unknown tool ${JSON.stringify(call.name)}; available tools: ${context.availableList}`), true);
  }
  try {
    const result = await context.runner(context.root, call.name, call.arguments, context.sandbox);
    return reply(formatObservation(result), result.status === 'error');
  } catch (error) {
    // runTool never throws; a wrapped runner might, and one broken call must not lose the turn.
    return reply(errorObservation(`the tool failed: ${error instanceof Error ? error.message : String(error)}`), true);
  }
}

export async function runToolTurn(calls: readonly PendingCall[], context: ToolTurnContext): Promise<ToolTurnOutcome> {
  const cap = context.maxToolCallsPerTurn;
  const executed = calls.slice(0, cap);
  const dropped = calls.slice(cap);
  const outcomes = await Promise.all(executed.map((call) => runCall(call, context)));
  const observations: ChatMessage[] = outcomes.map((o) => o.message);
  dropped.forEach((call, k) => {
    observations.push(
      toolObservationMessage({
        toolCallId: call.id,
        ...(call.name === '' ? {} : { name: call.name }),
        content: droppedCallNotice(cap + k + 1, calls.length, cap),
      }),
    );
  });
  return { observations, executed: executed.length, dropped: dropped.length, failed: outcomes.filter((o) => o.failed).length };
}

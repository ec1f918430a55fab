import type { AssistantMessage, WireToolCall } from '../../schemas/agent';
import { extractToolCalls, splitThinking } from './qwen3-format';

/**
 * One assistant reply as the episode receives it (from an OpenAI-compatible server, or as the trainer's raw
 * Qwen3 text), and its reading: the visible content, the reasoning, and the tool calls it makes, in the
 * message the conversation keeps.
 */

export interface AssistantToolCall {
  /** The call id from the server; generated when absent (raw Qwen3 text has none). */
  id?: string;
  name: string;
  /** JSON text of the arguments, as OpenAI sends them. */
  arguments: string;
}

export interface AssistantTurn {
  /** The reply text. Without `toolCalls`, tool calls are parsed out of it (Qwen3 `<tool_call>` blocks). */
  text: string;
  /** Calls already parsed by the server (native tool calling). */
  toolCalls?: AssistantToolCall[];
  /** Reasoning the server returned separately (vLLM/SGLang `reasoning_content`). */
  reasoning?: string;
  /** This reply's token counts (the server's `usage`, or the trainer's own counts). */
  usage?: { promptTokens: number; completionTokens: number };
  /** `'length'` means generation stopped at its token limit: the completion budget is spent. */
  finishReason?: string | null;
}

/** A tool call of a reply, read and given an id, before it runs. */
export interface PendingCall {
  id: string;
  name: string;
  arguments: string;
  /** Set for a `<tool_call>` block that could not be read: the error observation's text. */
  malformed?: string;
}

export interface ReadReply {
  /** The visible text, reasoning and tool-call blocks removed. */
  content: string;
  calls: PendingCall[];
  /** The message the conversation keeps for this reply. */
  assistant: AssistantMessage;
}

function pendingCalls(reply: AssistantTurn, visible: string, turn: number): { content: string; calls: PendingCall[] } {
  const generatedId = (index: number) => `call_${turn}_${index}`;
  if (reply.toolCalls !== undefined) {
    const calls = reply.toolCalls.map((call, index) => ({
      id: typeof call.id === 'string' && call.id !== '' ? call.id : generatedId(index),
      name: typeof call.name === 'string' ? call.name.trim() : '',
      arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {}),
    }));
    return { content: visible.trim(), calls };
  }
  const parsed = extractToolCalls(visible);
  const calls = parsed.toolCalls.map((call, index): PendingCall =>
    call.kind === 'call'
      ? { id: generatedId(index), name: call.name, arguments: call.arguments }
      : { id: generatedId(index), name: call.name ?? '', arguments: call.raw, malformed: call.error },
  );
  return { content: parsed.rest.trim(), calls };
}

/** Reads the reply of turn `turn` (1-based; it names the generated call ids). */
export function readAssistantTurn(reply: AssistantTurn, turn: number): ReadReply {
  const thinking = splitThinking(reply.text);
  const { content, calls } = pendingCalls(reply, thinking.rest, turn);
  const reasoning = [reply.reasoning?.trim(), thinking.reasoning].filter((r): r is string => !!r).join('\n\n');
  const wireCalls: WireToolCall[] = calls.map((c) => ({
    id: c.id,
    type: 'function',
    function: { name: c.name, arguments: c.arguments },
  }));
  const assistant: AssistantMessage = {
    role: 'assistant',
    content,
    ...(reasoning === '' ? {} : { reasoning_content: reasoning }),
    ...(wireCalls.length === 0 ? {} : { tool_calls: wireCalls }),
  };
  return { content, calls, assistant };
}

/**
 * The OpenAI chat messages of a trajectory row, read defensively: the miner must count a bad message and go
 * on, never throw. Only what mining uses is kept.
 */
export type ToolCall = { id: string | undefined; name: string; arguments: unknown };

export type ChatMessage = {
  role: string;
  /** Text of `content`: a string as is, an array of parts joined by their `text`, null/missing as ''. */
  text: string;
  toolCalls: ToolCall[];
  toolCallId: string | undefined;
  /** Tool calls present but unreadable (not an object, no function name). */
  malformedToolCalls: number;
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (typeof part === 'string' ? part : isRecord(part) && typeof part.text === 'string' ? part.text : ''))
      .join('');
  }
  return '';
}

/** null when the value is not a message at all (not an object, or no string `role`). */
export function readChatMessage(value: unknown): ChatMessage | null {
  if (!isRecord(value) || typeof value.role !== 'string') return null;
  const toolCalls: ToolCall[] = [];
  let malformedToolCalls = 0;
  if (Array.isArray(value.tool_calls)) {
    for (const call of value.tool_calls) {
      const fn = isRecord(call) ? call.function : undefined;
      if (!isRecord(call) || !isRecord(fn) || typeof fn.name !== 'string') {
        malformedToolCalls++;
        continue;
      }
      toolCalls.push({ id: typeof call.id === 'string' ? call.id : undefined, name: fn.name, arguments: fn.arguments });
    }
  } else if (value.tool_calls !== undefined && value.tool_calls !== null) {
    malformedToolCalls++;
  }
  return {
    role: value.role,
    text: contentText(value.content),
    toolCalls,
    toolCallId: typeof value.tool_call_id === 'string' ? value.tool_call_id : undefined,
    malformedToolCalls,
  };
}

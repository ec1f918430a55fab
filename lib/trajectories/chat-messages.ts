/**
 * Accessors for the OpenAI chat messages of a trajectory row, read defensively (the miner must count a bad
 * message and go on, never throw) and lazily: a trajectory holds ~100 messages, mostly tool output that mining
 * never looks into, so nothing is copied up front.
 */
export type ToolCall = { id: string | undefined; name: string; arguments: unknown };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The message's role, or null when the value is not a message (not an object, or no string `role`). */
export function messageRole(message: unknown): string | null {
  return isRecord(message) && typeof message.role === 'string' ? message.role : null;
}

/** Text of `content`: a string as is, an array of parts joined by their `text`, anything else ''. */
export function messageText(message: unknown): string {
  const content = isRecord(message) ? message.content : undefined;
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (typeof part === 'string' ? part : isRecord(part) && typeof part.text === 'string' ? part.text : ''))
      .join('');
  }
  return '';
}

export function messageToolCallId(message: unknown): string | undefined {
  return isRecord(message) && typeof message.tool_call_id === 'string' ? message.tool_call_id : undefined;
}

/** The readable tool calls of an assistant message, and how many were unreadable (no object, no function name). */
export function messageToolCalls(message: unknown): { calls: ToolCall[]; malformed: number } {
  const raw = isRecord(message) ? message.tool_calls : undefined;
  if (raw === undefined || raw === null) return { calls: [], malformed: 0 };
  if (!Array.isArray(raw)) return { calls: [], malformed: 1 };
  const calls: ToolCall[] = [];
  let malformed = 0;
  for (const call of raw) {
    const fn = isRecord(call) ? call.function : undefined;
    if (!isRecord(call) || !isRecord(fn) || typeof fn.name !== 'string') {
      malformed++;
      continue;
    }
    calls.push({ id: typeof call.id === 'string' ? call.id : undefined, name: fn.name, arguments: fn.arguments });
  }
  return { calls, malformed };
}

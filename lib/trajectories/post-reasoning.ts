import { messageRole, messageText, messageToolCallId } from './chat-messages';

/**
 * "After a view we skip over any subsequent role="tool" messages and locate the next role="assistant"
 * message, whose content is recorded as the file's post-reasoning" (CodeGrep App. A.2). Anything between
 * (tool results, a "please continue" user nudge) is skipped. Returns the message index, or -1 when the
 * trajectory ends first.
 */
export function followingAssistantIndex(messages: readonly unknown[], viewTurnIndex: number): number {
  for (let i = viewTurnIndex + 1; i < messages.length; i++) {
    if (messageRole(messages[i]) === 'assistant') return i;
  }
  return -1;
}

/**
 * The tool results answering the calls of the assistant message at `turnIndex`: the run of role="tool"
 * messages right after it, matched by `tool_call_id`, or by position when the results carry no id.
 */
export function toolObservations(
  messages: readonly unknown[],
  turnIndex: number,
): (callId: string | undefined, position: number) => string | undefined {
  const byId = new Map<string, string>();
  const byPosition: string[] = [];
  for (let i = turnIndex + 1; i < messages.length && messageRole(messages[i]) === 'tool'; i++) {
    const text = messageText(messages[i]);
    const id = messageToolCallId(messages[i]);
    if (id !== undefined) byId.set(id, text);
    byPosition.push(text);
  }
  return (callId, position) =>
    callId !== undefined && byId.has(callId) ? byId.get(callId) : byId.size === 0 ? byPosition[position] : undefined;
}

/** str_replace_editor reports a failed view (bad path, bad range) as an observation starting with "ERROR:". */
export function isErrorObservation(observation: string | undefined): boolean {
  return observation !== undefined && /^\s*ERROR:/.test(observation);
}

import type { ToolCall } from './chat-messages';

/** File reads in OpenHands trajectories: `str_replace_editor` with `command: "view"` (CodeGrep App. A.2). */
export const FILE_VIEW_TOOL = 'str_replace_editor';
export const FILE_VIEW_COMMAND = 'view';

export type ViewCall =
  | { kind: 'notView' }
  /** Arguments that are not a JSON object (or a JSON string of one): it may have been a view, so it is counted. */
  | { kind: 'unreadableArguments'; detail: string }
  /** `path` is the raw string, or undefined when the view names no usable path. */
  | { kind: 'view'; path: string | undefined };

/** Decodes one tool call; `arguments` is a JSON string in OpenAI messages, an object in some exports. */
export function readViewCall(call: ToolCall): ViewCall {
  if (call.name !== FILE_VIEW_TOOL) return { kind: 'notView' };
  let args: unknown = call.arguments;
  // A view's arguments name the command "view". Most editor calls are edits whose arguments carry whole file
  // bodies: skipping the JSON parse for them is most of mining's own cost. (Such a call is not a view even if
  // its JSON is broken, so it is not counted as nonJsonArguments either.)
  if (typeof args === 'string' && !args.includes(FILE_VIEW_COMMAND)) return { kind: 'notView' };
  if (typeof args === 'string') {
    try {
      args = JSON.parse(args) as unknown;
    } catch (err) {
      return { kind: 'unreadableArguments', detail: `arguments are not JSON (${(err as Error).message.slice(0, 80)})` };
    }
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    return {
      kind: 'unreadableArguments',
      detail: `arguments are ${args === null ? 'null' : Array.isArray(args) ? 'an array' : typeof args}, not an object`,
    };
  }
  const record = args as Record<string, unknown>;
  if (record.command !== FILE_VIEW_COMMAND) return { kind: 'notView' };
  return { kind: 'view', path: typeof record.path === 'string' && record.path.trim() !== '' ? record.path : undefined };
}

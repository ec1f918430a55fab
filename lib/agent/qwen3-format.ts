import type { ToolMessage } from '../../schemas/agent';

/**
 * Raw Qwen3 assistant text, as the GPU trainer's vLLM generates it without a server-side tool parser, and
 * the tool messages it gets back. Qwen3's chat template (Hermes-style function calling) writes each call as
 *
 *     <tool_call>
 *     {"name": "grep", "arguments": {"pattern": "def foo"}}
 *     </tool_call>
 *
 * possibly several in a row, after optional reasoning in `<think>…</think>`. A template that opens `<think>`
 * in the generation prompt leaves the reply with only the closing tag; a reply cut by the token budget may
 * leave a block unclosed. Nothing here throws: an unreadable block becomes a malformed call, which the episode
 * answers with an error observation.
 */

export interface Qwen3ToolCall {
  kind: 'call';
  name: string;
  /** JSON text of the arguments (an object in the block is re-encoded; a string is passed on as sent). */
  arguments: string;
  /** The block's text between the tags. */
  raw: string;
}

export interface Qwen3MalformedToolCall {
  kind: 'malformed';
  /** The tool name, when the block was readable far enough to have one. */
  name?: string;
  raw: string;
  /** What is wrong, worded for the model. */
  error: string;
}

export type Qwen3ParsedToolCall = Qwen3ToolCall | Qwen3MalformedToolCall;

export interface Qwen3Assistant {
  /** The text with reasoning and tool-call blocks removed, trimmed. */
  content: string;
  /** The reasoning text, when the reply had any. */
  reasoning?: string;
  /** Every `<tool_call>` block in order, readable or not. */
  toolCalls: Qwen3ParsedToolCall[];
}

const THINK_OPEN = '<think>';
const THINK_CLOSE = '</think>';
const CALL_OPEN = '<tool_call>';
const CALL_CLOSE = '</tool_call>';

/** Splits reasoning off: `<think>…</think>` blocks, a leading reasoning closed by a bare `</think>`, or an unclosed `<think>` to the end. */
export function splitThinking(text: string): { reasoning?: string; rest: string } {
  const parts: string[] = [];
  let rest = text;
  const firstOpen = rest.indexOf(THINK_OPEN);
  const firstClose = rest.indexOf(THINK_CLOSE);
  if (firstClose !== -1 && (firstOpen === -1 || firstClose < firstOpen)) {
    parts.push(rest.slice(0, firstClose));
    rest = rest.slice(firstClose + THINK_CLOSE.length);
  }
  for (;;) {
    const open = rest.indexOf(THINK_OPEN);
    if (open === -1) break;
    const close = rest.indexOf(THINK_CLOSE, open + THINK_OPEN.length);
    if (close === -1) {
      parts.push(rest.slice(open + THINK_OPEN.length));
      rest = rest.slice(0, open);
      break;
    }
    parts.push(rest.slice(open + THINK_OPEN.length, close));
    rest = rest.slice(0, open) + rest.slice(close + THINK_CLOSE.length);
  }
  const reasoning = parts
    .map((p) => p.trim())
    .filter((p) => p !== '')
    .join('\n\n');
  return reasoning === '' ? { rest } : { reasoning, rest };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Reads one block's JSON: `{"name": string, "arguments": object | string}`. */
export function parseToolCallBlock(raw: string): Qwen3ParsedToolCall {
  const body = raw.trim();
  if (body === '') return { kind: 'malformed', raw, error: 'empty <tool_call> block; expected {"name": ..., "arguments": {...}}' };
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return { kind: 'malformed', raw, error: `<tool_call> block is not valid JSON (${reason}); expected {"name": ..., "arguments": {...}}` };
  }
  if (!isRecord(value))
    return { kind: 'malformed', raw, error: '<tool_call> block must be a JSON object {"name": ..., "arguments": {...}}' };
  const { name, arguments: args } = value;
  if (typeof name !== 'string' || name.trim() === '') {
    return { kind: 'malformed', raw, error: '<tool_call> block has no "name" string naming the tool' };
  }
  const encoded = args === undefined || args === null ? '{}' : typeof args === 'string' ? args : JSON.stringify(args);
  return { kind: 'call', name: name.trim(), arguments: encoded, raw };
}

/** Cuts every `<tool_call>` block out of `text`; an opening tag with no closing tag runs to the end and is malformed. */
export function extractToolCalls(text: string): { rest: string; toolCalls: Qwen3ParsedToolCall[] } {
  const toolCalls: Qwen3ParsedToolCall[] = [];
  const kept: string[] = [];
  let cursor = 0;
  for (;;) {
    const open = text.indexOf(CALL_OPEN, cursor);
    if (open === -1) {
      kept.push(text.slice(cursor));
      break;
    }
    kept.push(text.slice(cursor, open));
    const bodyStart = open + CALL_OPEN.length;
    const close = text.indexOf(CALL_CLOSE, bodyStart);
    const nextOpen = text.indexOf(CALL_OPEN, bodyStart);
    if (close === -1 || (nextOpen !== -1 && nextOpen < close)) {
      // Unclosed: the block ends where the next one starts, or at the end of the text.
      const end = nextOpen === -1 ? text.length : nextOpen;
      const raw = text.slice(bodyStart, end);
      const parsed = parseToolCallBlock(raw);
      toolCalls.push({
        kind: 'malformed',
        raw,
        error: `<tool_call> block has no closing </tool_call>${parsed.kind === 'malformed' ? `; ${parsed.error}` : ''}`,
        ...(parsed.kind === 'call' ? { name: parsed.name } : {}),
      });
      cursor = end;
      continue;
    }
    toolCalls.push(parseToolCallBlock(text.slice(bodyStart, close)));
    cursor = close + CALL_CLOSE.length;
  }
  return { rest: kept.join(''), toolCalls };
}

/** Reasoning, visible text and tool calls of one raw Qwen3 assistant reply. */
export function parseQwen3Assistant(text: string): Qwen3Assistant {
  const { reasoning, rest } = splitThinking(text);
  const { rest: visible, toolCalls } = extractToolCalls(rest);
  return { content: visible.trim(), ...(reasoning === undefined ? {} : { reasoning }), toolCalls };
}

/**
 * A tool observation as a chat message. The Qwen3 chat template renders consecutive `tool` messages as
 * `<tool_response>` blocks of one user turn (ignoring the id), OpenAI-compatible servers match them to the
 * assistant's calls by `tool_call_id`.
 */
export function toolObservationMessage(observation: { toolCallId: string; name?: string; content: string }): ToolMessage {
  return {
    role: 'tool',
    tool_call_id: observation.toolCallId,
    ...(observation.name === undefined ? {} : { name: observation.name }),
    content: observation.content,
  };
}

import { describe, expect, it } from 'vitest';
import { extractToolCalls, parseQwen3Assistant, parseToolCallBlock, splitThinking, toolObservationMessage } from './qwen3-format';

describe('splitThinking', () => {
  it('removes <think> blocks and keeps their text as reasoning', () => {
    expect(splitThinking('<think>\nplan\n</think>\n\nanswer')).toEqual({ reasoning: 'plan', rest: '\n\nanswer' });
    expect(splitThinking('<think>a</think>x<think>b</think>y')).toEqual({ reasoning: 'a\n\nb', rest: 'xy' });
  });

  it('reads a reply whose <think> was opened by the generation prompt (only </think> in the text)', () => {
    expect(splitThinking('plan first\n</think>\n\nvisible')).toEqual({ reasoning: 'plan first', rest: '\n\nvisible' });
  });

  it('treats an unclosed <think> (reply cut by the budget) as reasoning to the end', () => {
    expect(splitThinking('before <think>still thinking')).toEqual({ reasoning: 'still thinking', rest: 'before ' });
  });

  it('leaves text without reasoning alone, and drops empty reasoning', () => {
    expect(splitThinking('plain')).toEqual({ rest: 'plain' });
    expect(splitThinking('<think>\n\n</think>text')).toEqual({ rest: 'text' });
  });
});

describe('parseToolCallBlock', () => {
  it('reads name and object arguments, re-encoding them as JSON text', () => {
    expect(parseToolCallBlock('\n{"name": "grep", "arguments": {"pattern": "a|b", "glob": "*.py"}}\n')).toMatchObject({
      kind: 'call',
      name: 'grep',
      arguments: '{"pattern":"a|b","glob":"*.py"}',
    });
  });

  it('passes string arguments on as sent and reads missing arguments as {}', () => {
    expect(parseToolCallBlock('{"name": "read", "arguments": "{\\"path\\": \\"a.py\\"}"}')).toMatchObject({
      arguments: '{"path": "a.py"}',
    });
    expect(parseToolCallBlock('{"name": "glob"}')).toMatchObject({ kind: 'call', arguments: '{}' });
  });

  it('reports unreadable blocks instead of throwing', () => {
    expect(parseToolCallBlock('  ')).toMatchObject({ kind: 'malformed', error: expect.stringMatching(/^empty <tool_call> block/) });
    expect(parseToolCallBlock('{"name": "grep", ')).toMatchObject({ kind: 'malformed', error: expect.stringMatching(/not valid JSON/) });
    expect(parseToolCallBlock('["grep"]')).toMatchObject({ kind: 'malformed', error: expect.stringMatching(/must be a JSON object/) });
    expect(parseToolCallBlock('{"arguments": {}}')).toMatchObject({ kind: 'malformed', error: expect.stringMatching(/no "name"/) });
    expect(parseToolCallBlock('{"name": "  "}')).toMatchObject({ kind: 'malformed' });
  });
});

describe('extractToolCalls', () => {
  it('cuts every block out, in order, keeping the text around them', () => {
    const text = 'a<tool_call>{"name": "x"}</tool_call>b<tool_call>{"name": "y", "arguments": {"k": 1}}</tool_call>c';
    const { rest, toolCalls } = extractToolCalls(text);
    expect(rest).toBe('abc');
    expect(toolCalls.map((c) => (c.kind === 'call' ? [c.name, c.arguments] : c.kind))).toEqual([
      ['x', '{}'],
      ['y', '{"k":1}'],
    ]);
  });

  it('marks a block without </tool_call> malformed, ending it at the next block or the end of the text', () => {
    const { rest, toolCalls } = extractToolCalls(
      '<tool_call>{"name": "grep", "arguments": {}}<tool_call>{"name": "glob"}</tool_call><tool_call>{"name": "re',
    );
    expect(rest).toBe('');
    expect(toolCalls).toHaveLength(3);
    expect(toolCalls[0]).toMatchObject({ kind: 'malformed', name: 'grep', error: '<tool_call> block has no closing </tool_call>' });
    expect(toolCalls[1]).toMatchObject({ kind: 'call', name: 'glob' });
    expect(toolCalls[2]).toMatchObject({
      kind: 'malformed',
      error: expect.stringMatching(/no closing <\/tool_call>; <tool_call> block is not valid JSON/),
    });
  });
});

describe('parseQwen3Assistant', () => {
  it('splits a full reply into reasoning, visible text and calls', () => {
    const parsed = parseQwen3Assistant(
      '<think>check both</think>\nTwo searches.\n<tool_call>\n{"name": "grep", "arguments": {"pattern": "foo"}}\n</tool_call>\n<tool_call>\n{"name": "glob", "arguments": {"pattern": "*.py"}}\n</tool_call>',
    );
    expect(parsed.reasoning).toBe('check both');
    expect(parsed.content).toBe('Two searches.');
    expect(parsed.toolCalls.map((c) => c.kind === 'call' && c.name)).toEqual(['grep', 'glob']);
  });
});

describe('toolObservationMessage', () => {
  it('renders an observation as a tool chat message', () => {
    expect(toolObservationMessage({ toolCallId: 'call_1_0', name: 'grep', content: 'a.py:1:x' })).toEqual({
      role: 'tool',
      tool_call_id: 'call_1_0',
      name: 'grep',
      content: 'a.py:1:x',
    });
    expect(toolObservationMessage({ toolCallId: 'c', content: 'Error: x' })).toEqual({
      role: 'tool',
      tool_call_id: 'c',
      content: 'Error: x',
    });
  });
});

import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EpisodeResultSchema, type ChatMessage, type ToolMessage } from '../../schemas/agent';
import { createEpisode, type AssistantToolCall, type CreateEpisodeOptions } from './episode';
import { countingRunner, makeAgentFixture, type AgentFixture } from '../../test/fixtures/agent/fixture';

let fixture: AgentFixture;
beforeAll(async () => {
  fixture = await makeAgentFixture();
});
afterAll(async () => {
  await fixture.cleanup();
});

function episode(overrides: Partial<CreateEpisodeOptions> = {}) {
  return createEpisode({ instance: fixture.instance, worktreeRoot: fixture.root, answerFormat: 'codegrep', ...overrides });
}

const grepCall = (id: string, pattern: string): AssistantToolCall => ({ id, name: 'grep', arguments: JSON.stringify({ pattern }) });
const toolMessages = (messages: ChatMessage[]) => messages.filter((m): m is ToolMessage => m.role === 'tool');

describe('createEpisode', () => {
  it('opens with a system prompt stating the limits and a user prompt carrying the real issue', () => {
    const ep = episode();
    const [system, user] = ep.initialMessages;
    expect(system?.role).toBe('system');
    expect(system?.content).toContain('at most 4 turns: 3 exploration turns and 1 final answer turn');
    expect(system?.content).toContain('up to 8');
    expect(system?.content).toContain('<answer>{"files": [');
    expect(user?.role).toBe('user');
    expect(user?.content).toContain('Repository: astropy/astropy');
    expect(user?.content).toContain("Modeling's `separability_matrix` does not compute separability correctly for nested CompoundModels");
    expect(ep.tools.map((t) => t.function.name)).toEqual(['grep', 'glob', 'read']);
    expect(ep.turn).toBe(0);
    expect(ep.done).toBe(false);
  });

  it('offers the terminal and localization_finish for CodeScout, with Table 7 parameters', () => {
    const ep = episode({ answerFormat: 'codescout' });
    expect(ep.tools.map((t) => t.function.name)).toEqual(['terminal', 'localization_finish']);
    const finish = ep.tools[1]!.function.parameters as {
      required: string[];
      properties: { locations: { items: { required: string[]; properties: Record<string, unknown> } } };
    };
    expect(finish.required).toEqual(['locations']);
    expect(finish.properties.locations.items.required).toEqual(['file']);
    expect(Object.keys(finish.properties.locations.items.properties)).toEqual(['file', 'class_name', 'function_name']);
    expect(ep.initialMessages[0]?.content).toContain('call localization_finish exactly once');
  });

  it('rejects bad inputs with errors that name them', () => {
    expect(() => episode({ worktreeRoot: path.join(fixture.root, 'missing') })).toThrow(
      /worktreeRoot .*missing.* is not an existing directory/,
    );
    expect(() => episode({ limits: { maxTurns: 0 } })).toThrow(/maxTurns: maxTurns must be at least 1/);
    expect(() => episode({ instance: { ...fixture.instance, problemStatement: '  ' } })).toThrow(/problemStatement/);
    expect(() => episode({ answerFormat: 'xml' as never })).toThrow(/answerFormat must be "codegrep" or "codescout"/);
  });
});

describe('step: tool calls', () => {
  it('runs the calls of one turn concurrently and answers each by its tool_call_id', async () => {
    const { runner, stats } = countingRunner();
    const ep = episode({ toolRunner: runner });
    const step = await ep.step({
      text: 'Looking for the separability code.',
      toolCalls: [grepCall('a', 'def separability_matrix'), grepCall('b', 'class CompoundModel'), grepCall('c', 'def _cstack')],
    });
    expect(step.done).toBe(false);
    expect(stats.peak).toBe(3);
    const byId = Object.fromEntries(toolMessages(step.observations).map((m) => [m.tool_call_id, m]));
    expect(Object.keys(byId)).toEqual(['a', 'b', 'c']);
    expect(byId.a?.content).toContain('astropy/modeling/separable.py:11:def separability_matrix(transform):');
    expect(byId.b?.content).toContain('astropy/modeling/core.py:10:class CompoundModel(Model):');
    expect(byId.c?.content).toContain('astropy/modeling/separable.py:16:def _cstack(left, right):');
    expect(byId.a?.name).toBe('grep');

    await ep.step({ text: '<answer>{"files": ["astropy/modeling/separable.py"]}</answer>' });
    const result = ep.result();
    expect(result.toolCalls).toBe(3);
    expect(result.toolCallsPerTurn).toEqual([3, 0]);
    expect(result.turns).toBe(2);
    expect(result.endReason).toBe('answer');
    // The trajectory is a valid OpenAI conversation: the assistant's calls, then one tool message per call.
    const assistant = result.trajectory[2];
    expect(assistant).toMatchObject({ role: 'assistant', content: 'Looking for the separability code.' });
    expect(assistant?.role === 'assistant' && assistant.tool_calls?.map((c) => c.id)).toEqual(['a', 'b', 'c']);
    expect(EpisodeResultSchema.parse(result)).toEqual(result);
  });

  it('runs only the first 8 calls of a turn and tells the model the rest were not run', async () => {
    const { runner, stats } = countingRunner();
    const ep = episode({ toolRunner: runner });
    const calls = Array.from({ length: 10 }, (_, k) => grepCall(`call-${k + 1}`, `def ${k % 2 ? '_cstack' : 'is_separable'}`));
    const step = await ep.step({ text: '', toolCalls: calls });
    expect(stats.calls).toBe(8);
    const tools = toolMessages(step.observations);
    expect(tools.map((m) => m.tool_call_id)).toEqual(calls.map((c) => c.id));
    expect(tools[7]?.content).toContain('separable.py:');
    expect(tools[8]?.content).toBe('Not run: at most 8 tool calls are executed per turn, and this was call 9 of 10 in this turn.');
    expect(tools[9]?.content).toContain('call 10 of 10');
    await ep.step({ text: 'nothing more' });
    const result = ep.result();
    expect(result.toolCalls).toBe(8);
    expect(result.toolCallsDropped).toBe(2);
    expect(result.toolCallsPerTurn).toEqual([8, 0]);
  });

  it('ends after the 4th turn without running its calls, having warned after turn 3', async () => {
    const { runner, stats } = countingRunner();
    const ep = episode({ toolRunner: runner });
    const reminders: string[] = [];
    for (let turn = 1; turn <= 3; turn++) {
      const step = await ep.step({ text: `turn ${turn}`, toolCalls: [grepCall(`t${turn}`, 'Model')] });
      expect(step.done).toBe(false);
      reminders.push(...step.observations.filter((m) => m.role === 'user').map((m) => m.content));
      if (turn < 3) expect(step.observations.every((m) => m.role === 'tool')).toBe(true);
    }
    expect(reminders).toHaveLength(1);
    expect(reminders[0]).toMatch(/^That was turn 3 of 4\. Your next turn is the last one: tool calls will not be run, you must answer\./);
    const last = await ep.step({ text: 'one more look', toolCalls: [grepCall('t4', 'Model')] });
    expect(last).toEqual({ observations: [], done: true, endReason: 'turn_limit' });
    expect(stats.calls).toBe(3);
    const result = ep.result();
    expect(result).toMatchObject({ endReason: 'turn_limit', answer: null, answerValid: false, turns: 4, toolCalls: 3 });
    expect(result.answerError).toBeUndefined();
    expect(result.toolCallsPerTurn).toEqual([1, 1, 1, 0]);
    await expect(ep.step({ text: 'again' })).rejects.toThrow(/already done \(turn_limit\)/);
  });

  it('honours smaller limits, and reminds a CodeScout agent to call localization_finish', async () => {
    const ep = episode({ answerFormat: 'codescout', limits: { maxTurns: 2 } });
    expect(ep.initialMessages[0]?.content).toContain('at most 2 turns: 1 exploration turn and 1 final answer turn');
    const step = await ep.step({ text: '', toolCalls: [{ id: 't', name: 'terminal', arguments: '{"command": "ls astropy"}' }] });
    expect(step.observations.at(-1)).toEqual({
      role: 'user',
      content:
        'That was turn 1 of 2. Your next turn is the last one: other tools will not be run, you must answer. Call localization_finish now, exactly once.',
    });
    expect((await ep.step({ text: '', toolCalls: [{ id: 'u', name: 'terminal', arguments: '{"command": "ls"}' }] })).endReason).toBe(
      'turn_limit',
    );
    expect(ep.result()).toMatchObject({ turns: 2, toolCalls: 1, finishCalls: 0, answerValid: false });
  });

  it('ends on a turn with no tool call', async () => {
    const ep = episode();
    expect(() => ep.result()).toThrow(/is not done \(turn 0 of 4\)/);
    const step = await ep.step({ text: 'I think the bug is in separable.py.' });
    expect(step).toEqual({ observations: [], done: true, endReason: 'no_tool_call' });
    expect(ep.result()).toMatchObject({ turns: 1, toolCalls: 0, toolCallsPerTurn: [0], answer: null, answerValid: false });
  });

  it('answers malformed arguments and unknown tools with error observations and goes on', async () => {
    const ep = episode();
    const step = await ep.step({
      text: '',
      toolCalls: [
        { id: 'bad-json', name: 'grep', arguments: '{"pattern": "Model"' },
        { id: 'bad-type', name: 'read', arguments: '{"path": 5}' },
        { id: 'not-offered', name: 'terminal', arguments: '{"command": "ls"}' },
        { id: 'fine', name: 'glob', arguments: '{"pattern": "**/separable.py"}' },
      ],
    });
    expect(step.done).toBe(false);
    const byId = Object.fromEntries(toolMessages(step.observations).map((m) => [m.tool_call_id, m.content]));
    expect(byId['bad-json']).toMatch(/^Error: arguments for grep are not valid JSON/);
    expect(byId['bad-type']).toMatch(/^Error: invalid arguments for read: path: /);
    expect(byId['not-offered']).toBe('Error: unknown tool "terminal"; available tools: grep, glob, read');
    expect(byId.fine).toContain('astropy/modeling/separable.py');
    await ep.step({ text: '<answer>{"files": []}</answer>' });
    expect(ep.result()).toMatchObject({ toolCalls: 4, toolErrors: 3, endReason: 'answer', answer: { files: [], lineRanges: [] } });
  });
});

describe('step: answers', () => {
  it('parses a CodeGrep answer exactly: files, object and string line ranges, paths normalised against the worktree', async () => {
    const ep = episode();
    await ep.step({ text: '', toolCalls: [grepCall('g', '_cstack')] });
    const absolute = path.join(fixture.root, 'astropy/modeling/core.py');
    const step = await ep.step({
      text:
        '<think>The right block of _cstack is set to 1 instead of the right matrix.</think>\n' +
        'Final answer:\n<answer>{"files": ["astropy/modeling/separable.py", "' +
        absolute +
        '"], ' +
        '"line_ranges": [{"file": "astropy/modeling/separable.py", "start": 16, "end": 20}, "./astropy/modeling/core.py:10-14", ' +
        '{"path": "astropy/modeling/separable.py", "start": 11, "end": 11}]}</answer>',
    });
    expect(step).toEqual({ observations: [], done: true, endReason: 'answer' });
    const result = ep.result();
    expect(result.answer).toEqual({
      files: ['astropy/modeling/separable.py', 'astropy/modeling/core.py'],
      lineRanges: [
        { path: 'astropy/modeling/separable.py', start: 16, end: 20 },
        { path: 'astropy/modeling/core.py', start: 10, end: 14 },
        { path: 'astropy/modeling/separable.py', start: 11, end: 11 },
      ],
    });
    expect(result).toMatchObject({ answerValid: true, turns: 2, toolCalls: 1, toolCallsPerTurn: [1, 0] });
    const assistant = result.trajectory.at(-1);
    expect(assistant).toMatchObject({
      role: 'assistant',
      reasoning_content: 'The right block of _cstack is set to 1 instead of the right matrix.',
    });
  });

  it('records an answer outside the schema as invalid, with the reason', async () => {
    const cases: Array<[string, RegExp]> = [
      [
        '<answer>{"files": "astropy/modeling/separable.py"}</answer>',
        /does not match the schema: files: files must be a list of path strings/,
      ],
      [
        '<answer>{"files": ["a.py"], "line_ranges": [{"file": "a.py", "start": 9, "end": 3}]}</answer>',
        /line_ranges\[0\]: end must be >= start/,
      ],
      ['<answer>files: a.py</answer>', /not valid JSON/],
      ['<answer>{"files": ["a.py"]', /no closing <\/answer>/],
    ];
    for (const [text, error] of cases) {
      const ep = episode();
      const step = await ep.step({ text });
      expect(step.endReason).toBe('invalid_answer');
      const result = ep.result();
      expect(result.answerValid).toBe(false);
      expect(result.answer).toBeNull();
      expect(result.answerError).toMatch(error);
    }
  });

  it('parses CodeScout localization_finish, and records two calls in one turn as finishCalls 2', async () => {
    const once = episode({ answerFormat: 'codescout' });
    await once.step({ text: '', toolCalls: [{ id: 't', name: 'terminal', arguments: '{"command": "rg -n \\"def _cstack\\" astropy"}' }] });
    expect(once.done).toBe(false);
    const locations = [
      { file: 'astropy/modeling/separable.py', function_name: '_cstack', class_name: null },
      { file: 'astropy/modeling/core.py', class_name: 'CompoundModel', function_name: '__init__' },
      { file: 'astropy/modeling/models.py', class_name: '', function_name: null },
    ];
    const step = await once.step({
      text: '',
      toolCalls: [{ id: 'f', name: 'localization_finish', arguments: JSON.stringify({ locations }) }],
    });
    expect(step).toEqual({ observations: [], done: true, endReason: 'answer' });
    expect(once.result()).toMatchObject({
      answer: {
        locations: [
          { file: 'astropy/modeling/separable.py', function_name: '_cstack' },
          { file: 'astropy/modeling/core.py', class_name: 'CompoundModel', function_name: '__init__' },
          { file: 'astropy/modeling/models.py' },
        ],
      },
      answerValid: true,
      finishCalls: 1,
      turns: 2,
      toolCalls: 1,
    });
    const first = once.result().answer as { locations: object[] };
    expect(first.locations[0]).toEqual({ file: 'astropy/modeling/separable.py', function_name: '_cstack' });

    const twice = episode({ answerFormat: 'codescout' });
    const finish = { name: 'localization_finish', arguments: JSON.stringify({ locations: locations.slice(0, 1) }) };
    const end = await twice.step({
      text: '',
      toolCalls: [
        { id: 'f1', ...finish },
        { id: 'f2', ...finish },
      ],
    });
    expect(end.endReason).toBe('invalid_answer');
    expect(twice.result()).toMatchObject({ finishCalls: 2, answerValid: false, answer: null, turns: 1, toolCalls: 0 });
    expect(twice.result().answerError).toBe('localization_finish was called 2 times; it must be called exactly once');

    const badSchema = episode({ answerFormat: 'codescout' });
    await badSchema.step({
      text: '',
      toolCalls: [{ id: 'f', name: 'localization_finish', arguments: '{"locations": [{"class_name": "A"}]}' }],
    });
    expect(badSchema.result().answerError).toMatch(/locations\[0\]\.file: /);
  });

  it('ignores <answer> text in CodeScout format and localization_finish in CodeGrep format', async () => {
    const scout = episode({ answerFormat: 'codescout' });
    expect((await scout.step({ text: '<answer>{"files": ["a.py"]}</answer>' })).endReason).toBe('no_tool_call');
    const grep = episode();
    const step = await grep.step({ text: '', toolCalls: [{ id: 'f', name: 'localization_finish', arguments: '{"locations": []}' }] });
    expect(step.done).toBe(false);
    expect(toolMessages(step.observations)[0]?.content).toBe(
      'Error: unknown tool "localization_finish"; available tools: grep, glob, read',
    );
  });
});

describe('step: completion budget and tokens', () => {
  it('ends when the completion budget is spent or the reply was cut at its token limit', async () => {
    const { runner, stats } = countingRunner();
    const ep = episode({ limits: { maxCompletionTokens: 100 }, toolRunner: runner });
    await ep.step({ text: '', toolCalls: [grepCall('a', 'Model')], usage: { promptTokens: 900, completionTokens: 60 } });
    const step = await ep.step({ text: '', toolCalls: [grepCall('b', 'Model')], usage: { promptTokens: 1000, completionTokens: 40 } });
    expect(step.endReason).toBe('budget');
    expect(stats.calls).toBe(1);
    expect(ep.result()).toMatchObject({ promptTokens: 1900, completionTokens: 100, turns: 2, toolCalls: 1, toolCallsPerTurn: [1, 0] });

    const cut = episode();
    expect((await cut.step({ text: 'I will now grep for', finishReason: 'length' })).endReason).toBe('budget');
    const cutAnswer = episode();
    expect((await cutAnswer.step({ text: '<answer>{"files": ["astropy/mod', finishReason: 'length' })).endReason).toBe('budget');
    expect(cutAnswer.result().answerError).toBeUndefined();
  });

  it('refuses token counts that are not non-negative integers', async () => {
    const ep = episode();
    await expect(ep.step({ text: '', usage: { promptTokens: -1, completionTokens: 2 } })).rejects.toThrow(
      /usage.promptTokens must be a non-negative integer/,
    );
  });
});

describe('step: raw Qwen3 text (no structured tool calls)', () => {
  it('strips <think>, runs well-formed <tool_call> blocks and answers a malformed one with an error', async () => {
    const ep = episode();
    const text = [
      '<think>',
      'The issue is about nested compound models; look at _cstack and CompoundModel.',
      '</think>',
      '',
      'Searching.',
      '<tool_call>',
      '{"name": "grep", "arguments": {"pattern": "def _cstack"}}',
      '</tool_call>',
      '<tool_call>',
      '{"name": "read", "arguments": {"path": "astropy/modeling/core.py", "start_line": 10, "end_line": 11}}',
      '</tool_call>',
      '<tool_call>',
      '{"name": "glob", "arguments": {"pattern": "**/*.py"}',
      '</tool_call>',
    ].join('\n');
    const step = await ep.step({ text });
    expect(step.done).toBe(false);
    const tools = toolMessages(step.observations);
    expect(tools.map((m) => [m.tool_call_id, m.name])).toEqual([
      ['call_1_0', 'grep'],
      ['call_1_1', 'read'],
      ['call_1_2', undefined],
    ]);
    expect(tools[0]?.content).toContain('astropy/modeling/separable.py:16:def _cstack(left, right):');
    expect(tools[1]?.content).toContain('class CompoundModel(Model):');
    expect(tools[1]?.content).toContain('def __init__(self, op, left, right):');
    expect(tools[2]?.content).toMatch(/^Error: <tool_call> block is not valid JSON/);

    const assistant = ep.messages[2];
    expect(assistant).toEqual({
      role: 'assistant',
      content: 'Searching.',
      reasoning_content: 'The issue is about nested compound models; look at _cstack and CompoundModel.',
      tool_calls: [
        { id: 'call_1_0', type: 'function', function: { name: 'grep', arguments: '{"pattern":"def _cstack"}' } },
        {
          id: 'call_1_1',
          type: 'function',
          function: { name: 'read', arguments: '{"path":"astropy/modeling/core.py","start_line":10,"end_line":11}' },
        },
        { id: 'call_1_2', type: 'function', function: { name: '', arguments: '\n{"name": "glob", "arguments": {"pattern": "**/*.py"}\n' } },
      ],
    });

    await ep.step({ text: '<think>done</think><answer>{"files": ["astropy/modeling/separable.py"]}</answer>' });
    expect(ep.result()).toMatchObject({
      endReason: 'answer',
      toolCalls: 3,
      toolErrors: 1,
      answer: { files: ['astropy/modeling/separable.py'] },
    });
  });

  it('does not take an <answer> or <tool_call> written inside <think> for the real thing', async () => {
    const ep = episode();
    const step = await ep.step({
      text: '<think>maybe <answer>{"files": ["x.py"]}</answer> or <tool_call>{"name": "grep"}</tool_call></think>Let me decide later.',
    });
    expect(step.endReason).toBe('no_tool_call');
    expect(ep.result().answer).toBeNull();
  });
});

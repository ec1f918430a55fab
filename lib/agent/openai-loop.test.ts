import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { reply, startScriptedOpenAiServer, type ReplyScript, type ScriptedOpenAiServer } from '../../test/support/scripted-openai-server';
import { LlmAuthError } from '../llm/errors';
import { runAgentRetriever, type RunAgentRetrieverOptions } from './openai-loop';
import { countingRunner, makeAgentFixture, type AgentFixture } from '../../test/fixtures/agent/fixture';

let fixture: AgentFixture;
let server: ScriptedOpenAiServer | undefined;

beforeAll(async () => {
  fixture = await makeAgentFixture();
});
afterAll(async () => {
  await fixture.cleanup();
});
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function run(script: ReplyScript, overrides: Partial<RunAgentRetrieverOptions> = {}) {
  server = await startScriptedOpenAiServer({ script });
  return runAgentRetriever({
    endpoint: { baseUrl: server.baseUrl, model: 'codegrep-14b' },
    instance: fixture.instance,
    worktreeRoot: fixture.root,
    answerFormat: 'codegrep',
    retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1, timeoutMs: 10_000 },
    ...overrides,
  });
}

type SentMessage = {
  role: string;
  content?: unknown;
  tool_call_id?: string;
  tool_calls?: Array<{ id: string; function: { name: string } }>;
};
const sent = (callIndex: number) => (server!.requests[callIndex]!.body!.messages ?? []) as SentMessage[];

describe('runAgentRetriever', () => {
  it('drives a CodeGrep episode with native parallel tool calls and sums usage over the turns', async () => {
    const { runner, stats } = countingRunner();
    const result = await run(
      (_body, callIndex) =>
        callIndex === 0
          ? reply.toolCalls(
              [
                { id: 'call_sep', name: 'grep', arguments: { pattern: 'def separability_matrix' } },
                { id: 'call_cm', name: 'grep', arguments: { pattern: 'class CompoundModel' } },
                { id: 'call_py', name: 'glob', arguments: { pattern: 'astropy/modeling/*.py' } },
              ],
              { content: 'Three searches at once.', usage: { prompt_tokens: 812, completion_tokens: 64 } },
            )
          : reply.text(
              '<answer>{"files": ["astropy/modeling/separable.py"], "line_ranges": [{"file": "astropy/modeling/separable.py", "start": 16, "end": 20}]}</answer>',
              {
                usage: { prompt_tokens: 1210, completion_tokens: 41 },
              },
            ),
      { temperature: 1.0, topP: 0.9, toolRunner: runner },
    );

    expect(result).toMatchObject({
      endReason: 'answer',
      answerValid: true,
      answer: { files: ['astropy/modeling/separable.py'], lineRanges: [{ path: 'astropy/modeling/separable.py', start: 16, end: 20 }] },
      turns: 2,
      toolCalls: 3,
      toolCallsPerTurn: [3, 0],
      promptTokens: 812 + 1210,
      completionTokens: 64 + 41,
    });
    expect(stats.peak).toBe(3);

    expect(server!.requests).toHaveLength(2);
    const first = server!.requests[0]!.body!;
    expect(first.model).toBe('codegrep-14b');
    expect(first.parallel_tool_calls).toBe(true);
    expect(first.tool_choice).toBe('auto');
    expect(first.temperature).toBe(1.0);
    expect(first.top_p).toBe(0.9);
    expect(first.max_tokens).toBeUndefined();
    expect((first.tools as Array<{ function: { name: string } }>).map((t) => t.function.name)).toEqual(['grep', 'glob', 'read']);
    expect(sent(0).map((m) => m.role)).toEqual(['system', 'user']);

    // The second request replays the assistant's calls and one tool message per call, matched by id.
    const second = sent(1);
    expect(second.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'tool', 'tool']);
    expect(second[2]!.tool_calls!.map((c) => c.id)).toEqual(['call_sep', 'call_cm', 'call_py']);
    const byId = Object.fromEntries(second.slice(3).map((m) => [m.tool_call_id, String(m.content)]));
    expect(byId.call_sep).toContain('astropy/modeling/separable.py:11:def separability_matrix(transform):');
    expect(byId.call_cm).toContain('astropy/modeling/core.py:10:class CompoundModel(Model):');
    expect(byId.call_py).toContain('astropy/modeling/models.py');
    // Fields outside OpenAI's message schema stay out of the request.
    expect(second.slice(3).every((m) => !('name' in m))).toBe(true);
  });

  it('stops at the turn limit, having sent the last-turn reminder before turn 4', async () => {
    const result = await run((_body, callIndex) =>
      reply.toolCalls([{ name: 'grep', arguments: { pattern: `Model${callIndex}|Model` } }], {
        usage: { prompt_tokens: 100, completion_tokens: 10 },
      }),
    );
    expect(result).toMatchObject({
      endReason: 'turn_limit',
      answer: null,
      answerValid: false,
      turns: 4,
      toolCalls: 3,
      promptTokens: 400,
      completionTokens: 40,
    });
    expect(server!.requests).toHaveLength(4);
    const fourth = sent(3);
    expect(fourth.at(-1)).toMatchObject({
      role: 'user',
      content: expect.stringMatching(/^That was turn 3 of 4\. Your next turn is the last one/),
    });
    expect(sent(2).some((m) => m.role === 'user' && String(m.content).startsWith('That was'))).toBe(false);
  });

  it('runs a CodeScout episode to its localization_finish call', async () => {
    const result = await run(
      (_body, callIndex) =>
        callIndex === 0
          ? reply.toolCalls([{ name: 'terminal', arguments: { command: 'rg -n "def _cstack" astropy' } }])
          : reply.toolCalls([
              {
                name: 'localization_finish',
                arguments: { locations: [{ file: 'astropy/modeling/separable.py', class_name: null, function_name: '_cstack' }] },
              },
            ]),
      { answerFormat: 'codescout' },
    );
    expect(result).toMatchObject({
      endReason: 'answer',
      finishCalls: 1,
      answer: { locations: [{ file: 'astropy/modeling/separable.py', function_name: '_cstack' }] },
      turns: 2,
      toolCalls: 1,
    });
    expect(String(sent(1).at(-1)!.content)).toContain('astropy/modeling/separable.py:16:def _cstack(left, right):');
    expect((server!.requests[0]!.body!.tools as Array<{ function: { name: string } }>).map((t) => t.function.name)).toEqual([
      'terminal',
      'localization_finish',
    ]);
  });

  it('asks for no more than the remaining completion budget and ends when a reply is cut by it', async () => {
    const result = await run(
      (_body, callIndex) =>
        callIndex === 0
          ? reply.toolCalls([{ name: 'glob', arguments: { pattern: '**/*.py' } }], { usage: { prompt_tokens: 500, completion_tokens: 60 } })
          : reply.text('I should look at', { finishReason: 'length', usage: { prompt_tokens: 700, completion_tokens: 40 } }),
      { limits: { maxCompletionTokens: 100 } },
    );
    expect(server!.requests.map((r) => r.body!.max_tokens)).toEqual([100, 40]);
    expect(result).toMatchObject({ endReason: 'budget', turns: 2, completionTokens: 100, promptTokens: 1200 });
  });

  it('parses Qwen3 <tool_call> text when the server returns no parsed calls, and replays them with ids', async () => {
    const result = await run((_body, callIndex) =>
      callIndex === 0
        ? reply.text(
            'Let me search.\n<tool_call>\n{"name": "grep", "arguments": {"pattern": "def is_separable"}}\n</tool_call>\n<tool_call>\n{"name": "grep", "arguments": {"pattern": "def _separable"}}\n</tool_call>',
            { reasoningContent: 'Check the separable module.' },
          )
        : reply.text('<answer>{"files": ["astropy/modeling/separable.py"]}</answer>'),
    );
    expect(result).toMatchObject({ endReason: 'answer', toolCalls: 2 });
    const second = sent(1);
    expect(second[2]).toMatchObject({ role: 'assistant', content: 'Let me search.' });
    expect(second[2]!.tool_calls!.map((c) => [c.id, c.function.name])).toEqual([
      ['call_1_0', 'grep'],
      ['call_1_1', 'grep'],
    ]);
    expect(second.slice(3).map((m) => m.tool_call_id)).toEqual(['call_1_0', 'call_1_1']);
    expect(String(second[3]!.content)).toContain('separable.py:6:def is_separable(transform):');
    expect(String(second[4]!.content)).toContain('separable.py:23:def _separable(transform):');
    expect(result.trajectory[2]).toMatchObject({ reasoning_content: 'Check the separable module.' });
    expect('reasoning_content' in second[2]!).toBe(false);
  });

  it('rejects with lib/llm typed error when the endpoint refuses the key', async () => {
    await expect(run(() => reply.error(401))).rejects.toBeInstanceOf(LlmAuthError);
    expect(server!.requests).toHaveLength(1);
  });
});

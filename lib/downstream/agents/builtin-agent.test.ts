import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  reply,
  startScriptedOpenAiServer,
  type ReplyScript,
  type ScriptedOpenAiServer,
} from '../../../test/support/scripted-openai-server';
import type { InjectionConfiguration } from '../../../schemas/downstream';
import { createBuiltinAgent, type BuiltinAgentOptions } from './builtin-agent';
import { createLocalHarness } from '../harness/local-harness';
import { runDownstreamInstance } from '../runs/run-instance';
import { leftoverRuns, makeDownstreamFixture, type DownstreamFixture } from '../../../test/fixtures/downstream/fixture';

let fixture: DownstreamFixture;
let server: ScriptedOpenAiServer | undefined;

beforeAll(async () => {
  fixture = await makeDownstreamFixture();
});
afterAll(async () => {
  await fixture.cleanup();
});
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const oracle: InjectionConfiguration = { name: 'oracle', source: 'oracle' };

async function run(script: ReplyScript, agentOptions: Partial<BuiltinAgentOptions> = {}, configuration = oracle) {
  server = await startScriptedOpenAiServer({ script });
  const agent = createBuiltinAgent({
    endpoint: { baseUrl: server.baseUrl, model: 'qwen3-30b-a3b' },
    retry: { maxAttempts: 1, timeoutMs: 20_000 },
    ...agentOptions,
  });
  const harness = createLocalHarness({
    worktrees: fixture.worktrees,
    interpreter: fixture.python,
    testRunner: 'pytest',
    timeoutMs: 60_000,
  });
  return runDownstreamInstance({ configuration, instance: fixture.instance, agent, harness, worktrees: fixture.worktrees });
}

type Sent = { role: string; content?: string; tool_call_id?: string; tool_calls?: Array<{ id: string; function: { name: string } }> };
const sent = (callIndex: number) => (server!.requests[callIndex]!.body!.messages ?? []) as Sent[];

describe('built-in downstream agent', () => {
  it('fixes the bug with the terminal and the editor, submits, and the harness says resolved', async () => {
    const usage = [
      { prompt_tokens: 900, completion_tokens: 40 },
      { prompt_tokens: 1100, completion_tokens: 35 },
      { prompt_tokens: 1400, completion_tokens: 60 },
      { prompt_tokens: 1600, completion_tokens: 12 },
    ];
    const script: ReplyScript = (_body, call) => {
      switch (call) {
        case 0:
          return reply.toolCalls([{ id: 'c0', name: 'terminal', arguments: { command: "rg -n 'def add' calc" } }], {
            content: 'Find add.',
            usage: usage[0],
          });
        case 1:
          return reply.toolCalls([{ id: 'c1', name: 'str_replace_editor', arguments: { command: 'view', path: 'calc/ops.py' } }], {
            usage: usage[1],
          });
        case 2:
          return reply.toolCalls(
            [
              {
                id: 'c2',
                name: 'str_replace_editor',
                arguments: { command: 'str_replace', path: 'calc/ops.py', old_str: '    return a - b', new_str: '    return a + b' },
              },
            ],
            { usage: usage[2] },
          );
        default:
          return reply.toolCalls([{ id: 'c3', name: 'submit', arguments: { message: 'add now adds' } }], { usage: usage[3] });
      }
    };
    const result = await run(script);

    expect(result.row).toEqual({
      configuration: 'oracle',
      instanceId: 'acme__calc-1',
      resolved: true,
      outcome: 'resolved',
      rounds: 4,
      inputTokens: 900 + 1100 + 1400 + 1600,
      outputTokens: 40 + 35 + 60 + 12,
      patchBytes: Buffer.byteLength(result.agent!.patch),
      endReason: 'submitted',
      error: null,
    });
    expect(result.agent!.patch).toContain('-    return a - b\n+    return a + b');
    expect(result.agent!.patch).toMatch(/^diff --git a\/calc\/ops.py b\/calc\/ops.py/);
    expect(result.harness!.failToPass).toEqual([{ test: 'tests/test_ops.py::test_add', passed: true }]);

    // The oracle prompt reached the model; requests were temperature 0 with the three tools.
    const first = server!.requests[0]!.body!;
    expect(first.temperature).toBe(0);
    expect((first.tools as Array<{ function: { name: string } }>).map((t) => t.function.name)).toEqual([
      'terminal',
      'str_replace_editor',
      'submit',
    ]);
    expect(sent(0)[1]!.content).toContain('<candidate_files>\n- calc/ops.py\n</candidate_files>');
    // Observations went back under the calls' ids: the real rg output and the numbered file view.
    expect(sent(1).at(-1)).toMatchObject({
      role: 'tool',
      tool_call_id: 'c0',
      content: expect.stringContaining('calc/ops.py:1:def add(a, b):'),
    });
    expect(sent(2).at(-1)!.content).toContain('     2\t    return a - b');
    expect(sent(3).at(-1)!.content).toContain('has been edited');
    expect(result.agent!.trajectory.map((m) => m.role)).toEqual([
      'system',
      'user',
      'assistant',
      'tool',
      'assistant',
      'tool',
      'assistant',
      'tool',
      'assistant',
      'tool',
    ]);
    expect(await leftoverRuns(fixture)).toEqual([]);
  });

  it('a run that never edits gives an empty patch, which is unresolved', async () => {
    const result = await run(
      () => reply.text('I do not know how to fix this.', { usage: { prompt_tokens: 700, completion_tokens: 9 } }),
      {},
      { name: 'baseline', source: 'none' },
    );
    expect(result.row).toEqual({
      configuration: 'baseline',
      instanceId: 'acme__calc-1',
      resolved: false,
      outcome: 'unresolved',
      rounds: 1,
      inputTokens: 700,
      outputTokens: 9,
      patchBytes: 0,
      endReason: 'no_tool_call',
      error: null,
    });
    // The baseline prompt is the issue unchanged.
    expect(sent(0)[1]!.content).toContain('<issue_description>\nadd(2, 3) returns -1 instead of 5.\n\n</issue_description>');
    expect(sent(0)[1]!.content).not.toContain('candidate_files');
  });

  it('stops at the round limit and collects new files into the patch', async () => {
    const script: ReplyScript = (_body, call) =>
      call === 0
        ? reply.toolCalls([{ name: 'str_replace_editor', arguments: { command: 'create', path: 'calc/extra.py', file_text: 'X = 1\n' } }], {
            usage: { prompt_tokens: 10, completion_tokens: 1 },
          })
        : reply.toolCalls([{ name: 'terminal', arguments: { command: 'ls calc' } }], {
            usage: { prompt_tokens: 20, completion_tokens: 2 },
          });
    const result = await run(script, { maxRounds: 3 });
    expect(result.row).toMatchObject({ rounds: 3, inputTokens: 50, outputTokens: 5, endReason: 'round_limit', outcome: 'unresolved' });
    expect(result.agent!.patch).toContain('diff --git a/calc/extra.py b/calc/extra.py\nnew file mode 100644');
    expect(server!.requests).toHaveLength(3);
  });

  it('records endpoint failures in the row instead of throwing', async () => {
    const auth = await run(() => reply.error(401));
    expect(auth.row).toMatchObject({ rounds: 0, endReason: 'llm_error', outcome: 'unresolved', patchBytes: 0 });
    expect(auth.row.error).toMatch(/refused the API key/);
    await server!.close();

    const overflow = await run((_b, call) =>
      call === 0
        ? reply.toolCalls([{ name: 'terminal', arguments: { command: 'ls' } }], { usage: { prompt_tokens: 5, completion_tokens: 1 } })
        : reply.error(400, {
            body: { error: { message: "This model's maximum context length is 32768 tokens", type: 'invalid_request_error' } },
          }),
    );
    expect(overflow.row).toMatchObject({ rounds: 1, inputTokens: 5, outputTokens: 1, endReason: 'context_limit' });
  });

  it('feeds bad tool calls back as errors and keeps going', async () => {
    const script: ReplyScript = (_body, call) => {
      if (call === 0) {
        return reply.toolCalls([
          { id: 'a', name: 'bash', arguments: { command: 'rm -rf /' } },
          { id: 'b', name: 'str_replace_editor', arguments: '{not json' },
          { id: 'c', name: 'terminal', arguments: { command: 'cat calc/ops.py; touch pwned' } },
          { id: 'd', name: 'str_replace_editor', arguments: { command: 'create', path: '../escape.py', file_text: 'x' } },
        ]);
      }
      return reply.text('done');
    };
    const result = await run(script);
    const observations = sent(1).filter((m) => m.role === 'tool');
    expect(observations.map((m) => m.tool_call_id)).toEqual(['a', 'b', 'c', 'd']);
    expect(observations[0]!.content).toMatch(/unknown tool "bash"/);
    expect(observations[1]!.content).toMatch(/not valid JSON/);
    expect(observations[2]!.content).toMatch(/terminal:.*;/);
    expect(observations[3]!.content).toMatch(/leaves the repository root; refused/);
    expect(result.row).toMatchObject({ endReason: 'no_tool_call', patchBytes: 0, outcome: 'unresolved' });
  });
});

import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DownstreamInstance } from '../../../schemas/downstream';
import { createOpenHandsAdapter, type OpenHandsAdapterOptions } from './openhands-adapter';
import { makeDownstreamFixture, makeInstance, type DownstreamFixture } from '../../../test/fixtures/downstream/fixture';

/**
 * A stand-in for OpenHands: a small Node program that behaves like `run_infer.py` for one instance — reads
 * the prompt file, optionally edits the checkout, and writes an output.jsonl line in OpenHands' EvalOutput
 * layout (history events with tool_call_metadata, metrics with token usage, test_result.git_patch). It
 * echoes the argv it received so the test can see how placeholders arrived.
 */
const FAKE_OPENHANDS = String.raw`
import fs from 'node:fs';
import path from 'node:path';
const args = process.argv.slice(2);
const get = (flag) => args[args.indexOf(flag) + 1];
const mode = get('--mode');
const out = get('--out');
fs.writeFileSync(path.join(out, 'pid'), String(process.pid));
if (mode === 'hang') setInterval(() => {}, 1000);
else if (mode === 'fail') {
  process.stderr.write('Traceback (most recent call last):\nRuntimeError: runtime container crashed\n');
  process.exit(3);
} else {
  const prompt = fs.readFileSync(get('--prompt'), 'utf8');
  if (mode === 'edit') fs.appendFileSync(path.join(get('--workdir'), 'calc/ops.py'), '# touched by openhands\n');
  const call = (n, fn, action, extra) => ({ id: 2 * n, source: 'agent', action, args: { thought: 'step ' + n, ...extra }, tool_call_metadata: { function_name: fn, tool_call_id: 'toolu_' + n, model_response: { id: 'resp-' + n } } });
  const obs = (n, observation, content) => ({ id: 2 * n + 1, source: 'agent', observation, content, tool_call_metadata: { function_name: 'x', tool_call_id: 'toolu_' + n } });
  const history = [
    { id: 0, source: 'agent', action: 'system', args: { content: 'You are OpenHands agent.' } },
    { id: 1, source: 'user', action: 'message', args: { content: prompt } },
    call(1, 'execute_bash', 'run', { command: 'grep -rn "def add" calc' }),
    obs(1, 'run', 'calc/ops.py:1:def add(a, b):'),
    call(2, 'str_replace_editor', 'edit', { path: '/workspace/calc/ops.py' }),
    obs(2, 'edit', 'The file has been edited.'),
  ];
  if (mode !== 'maxiter') history.push(call(3, 'finish', 'finish', { final_thought: 'Fixed.' }));
  const usages = [[1000, 70], [1500, 60], [1821, 80]].map(([p, c], i) => ({ model: 'qwen3', prompt_tokens: p, completion_tokens: c, response_id: 'resp-' + (i + 1) }));
  const record = {
    instance_id: get('--instance'),
    instruction: prompt,
    test_result: mode === 'edit' ? {} : { git_patch: 'diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n' },
    history,
    metrics: mode === 'trajectory'
      ? { token_usages: usages }
      : { accumulated_cost: 0.02, accumulated_token_usage: { model: 'qwen3', prompt_tokens: 4321, completion_tokens: 210 }, token_usages: usages },
    error: mode === 'maxiter' ? 'RuntimeError: Agent reached maximum iteration in headless mode. Current iteration: 100, max iteration: 100' : null,
    metadata: { details: { argv: args } },
  };
  if (mode === 'trajectory') fs.writeFileSync(path.join(out, 'trajectory.json'), JSON.stringify(record, null, 2));
  else fs.writeFileSync(path.join(out, 'output.jsonl'), JSON.stringify({ instance_id: 'someone-else', test_result: {} }) + '\n' + JSON.stringify(record) + '\n');
}
`;

let fixture: DownstreamFixture;
let script: string;

beforeAll(async () => {
  fixture = await makeDownstreamFixture();
  script = path.join(fixture.parent, 'fake-openhands.mjs');
  await fs.writeFile(script, FAKE_OPENHANDS);
});
afterAll(async () => {
  await fixture.cleanup();
});

const template = (mode: string) =>
  `"${process.execPath}" "${script}" --mode ${mode} --instance {instance_id} --prompt {prompt_file} --workdir {workdir} --out {output_dir} --repo={repo}@{base_commit}`;

async function runAdapter(mode: string, instance: DownstreamInstance = fixture.instance, overrides: Partial<OpenHandsAdapterOptions> = {}) {
  const adapter = createOpenHandsAdapter({ command: template(mode), timeoutMs: 30_000, inheritedEnv: process.env, ...overrides });
  const checkout = await fixture.worktrees.create(instance.repo, instance.base_commit, `openhands-${mode}`);
  try {
    const result = await adapter.run(instance, 'PROMPT: fix add\n<candidate_files>\n- calc/ops.py\n</candidate_files>\n', {
      workdir: checkout.path,
      baseCommit: checkout.commit,
      scratch: checkout.scratch,
    });
    const outputDir = path.join(checkout.scratch, 'openhands');
    const output = await fs.readFile(path.join(outputDir, 'output.jsonl'), 'utf8').catch(() => '');
    const pid = Number(await fs.readFile(path.join(outputDir, 'pid'), 'utf8').catch(() => '0'));
    return { result, output, outputDir, pid, checkout };
  } finally {
    await checkout.dispose();
  }
}

describe('OpenHands adapter', () => {
  it('reads the patch, rounds, tokens and trajectory from output.jsonl; every placeholder stays one argument', async () => {
    const weird = makeInstance({ ...fixture.instance, instance_id: `calc-1; $(touch pwned) 'q' "dq" * --mode fail` });
    const { result, output, outputDir } = await runAdapter('ok', weird);
    expect(result).toMatchObject({ rounds: 3, inputTokens: 4321, outputTokens: 210, endReason: 'submitted' });
    expect(result.error).toBeUndefined();
    expect(result.patch).toContain('+    return a + b');
    expect(result.trajectory.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant', 'tool', 'assistant']);
    expect(result.trajectory[1]!.content).toBe('PROMPT: fix add\n<candidate_files>\n- calc/ops.py\n</candidate_files>\n');
    expect(result.trajectory[2]).toMatchObject({
      role: 'assistant',
      content: 'step 1',
      tool_calls: [{ id: 'toolu_1', function: { name: 'execute_bash' } }],
    });
    expect(result.trajectory[3]).toMatchObject({ role: 'tool', tool_call_id: 'toolu_1', content: 'calc/ops.py:1:def add(a, b):' });

    const argv = (JSON.parse(output.trim().split('\n')[1]!) as { metadata: { details: { argv: string[] } } }).metadata.details.argv;
    expect(argv[argv.indexOf('--instance') + 1]).toBe(weird.instance_id);
    expect(argv.filter((a) => a === '--mode')).toHaveLength(1);
    expect(argv[argv.indexOf('--out') + 1]).toBe(outputDir);
    expect(outputDir).toContain('runs dir');
    expect(argv.at(-1)).toBe(`--repo=acme/calc@${fixture.baseCommit}`);
    expect(argv).toHaveLength(11);
    await expect(fs.access(path.join(outputDir, 'pwned'))).rejects.toThrow();
    await expect(fs.access(path.join(process.cwd(), 'pwned'))).rejects.toThrow();
  });

  it('falls back to the checkout diff when the output has no git_patch', async () => {
    const { result } = await runAdapter('edit');
    expect(result.endReason).toBe('submitted');
    expect(result.patch).toMatch(/^diff --git a\/calc\/ops.py b\/calc\/ops.py/);
    expect(result.patch).toContain('+# touched by openhands');
  });

  it('reads a pretty-printed trajectory JSON and sums per-call usage when no total is given', async () => {
    const { result } = await runAdapter('trajectory', fixture.instance, { outputFile: 'trajectory.json' });
    expect(result).toMatchObject({ rounds: 3, inputTokens: 1000 + 1500 + 1821, outputTokens: 70 + 60 + 80, endReason: 'submitted' });
  });

  it('maps OpenHands’ iteration limit to round_limit', async () => {
    const { result } = await runAdapter('maxiter');
    expect(result).toMatchObject({ endReason: 'round_limit', rounds: 3 });
    expect(result.error).toMatch(/maximum iteration/);
  });

  it('reports a crashed run as agent_error with the stderr tail', async () => {
    const { result } = await runAdapter('fail');
    expect(result).toMatchObject({ endReason: 'agent_error', rounds: 0, inputTokens: 0, outputTokens: 0, patch: '' });
    expect(result.error).toMatch(/exit code 3/);
    expect(result.error).toMatch(/runtime container crashed/);
    expect(result.error).toMatch(/no output file/);
  });

  it('kills a run past its time limit (the process group) and says timeout', async () => {
    const started = performance.now();
    const { result, pid } = await runAdapter('hang', fixture.instance, { timeoutMs: 1_500 });
    expect(performance.now() - started).toBeLessThan(15_000);
    expect(result.endReason).toBe('timeout');
    expect(result.error).toMatch(/timed out after 1500 ms/);
    expect(pid).toBeGreaterThan(0);
    expect(() => process.kill(pid, 0)).toThrow(/ESRCH/);
  });

  it('refuses a template with an unknown placeholder', () => {
    expect(() => createOpenHandsAdapter({ command: 'run {instance}', timeoutMs: 1000, inheritedEnv: {} })).toThrow(
      /unknown placeholder \{instance\}/,
    );
  });
});

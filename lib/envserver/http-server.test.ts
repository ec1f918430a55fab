import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../test/support/repo-root';
import { createTrainingEnvironment } from './environment';
import { loadEnvSamples } from './env-samples';
import { startEnvServer, type EnvServer } from './http-server';
import { buildEnvFixture, qwen3ToolCalls, type EnvFixture } from '../../test/fixtures/envserver/fixture';

const execFileAsync = promisify(execFile);
let fixture: EnvFixture;
let server: EnvServer;

beforeAll(async () => {
  fixture = await buildEnvFixture();
  const { samples } = await loadEnvSamples(fixture.samples.uri, 'v3');
  server = await startEnvServer(createTrainingEnvironment({ samples, recipe: 'v3', limits: { maxTurns: 3 } }));
});
afterAll(async () => {
  await server?.close();
  fixture?.cleanup();
});

async function post(route: string, body: unknown, init: RequestInit = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${server.url}${route}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    ...init,
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('environment server over HTTP', () => {
  it('listens on loopback only, on a port of its own', () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(server.port).toBeGreaterThan(0);
  });

  it('answers every protocol error with a JSON body that says what is wrong', async () => {
    expect(await post('/episodes/nope', {})).toEqual({
      status: 404,
      body: { error: 'no route /episodes/nope (routes: /episodes/open, /episodes/step, /episodes/close)' },
    });
    const get = await fetch(`${server.url}/episodes/open`);
    expect([get.status, await get.json()]).toEqual([405, { error: '/episodes/open takes POST, not GET' }]);
    const notJson = await post('/episodes/open', '{"instanceIds": [');
    expect(notJson.status).toBe(400);
    expect(notJson.body.error).toMatch(/^\/episodes\/open: the request body is not valid JSON: /);
    const badField = await post('/episodes/open', { instanceIds: ['acme__widgets-1'], groupSize: 'eight', seed: 1 });
    expect(badField.status).toBe(400);
    expect(badField.body.error).toMatch(/^\/episodes\/open: groupSize: /);
    expect(await post('/episodes/close', { episodeIds: ['e-1'] })).toEqual({
      status: 404,
      body: { error: '/episodes/close: episodeIds[0]: unknown episode "e-1" (never opened, already closed, or opened by another server)' },
    });
  });

  it('plays a rollout over HTTP', async () => {
    const opened = await post('/episodes/open', { instanceIds: ['acme__widgets-2'], groupSize: 1, seed: 5 });
    expect(opened.status).toBe(200);
    const [episode] = opened.body.episodes as { episodeId: string; tools: unknown[] }[];
    const text = qwen3ToolCalls('belts', [{ name: 'grep', arguments: { pattern: 'def belt_length' } }]);
    const stepped = await post('/episodes/step', { steps: [{ episodeId: episode!.episodeId, assistantText: text, truncated: false }] });
    expect(stepped.status).toBe(200);
    const [result] = stepped.body.results as { done: boolean; observations: { role: string; content: string }[] }[];
    expect(result!.done).toBe(false);
    expect(result!.observations[0]!.content).toContain('widgets/belts.py:1:def belt_length(a, b, distance):');
    const finish = await post('/episodes/step', {
      steps: [{ episodeId: episode!.episodeId, assistantText: '<answer>{"files": ["widgets/belts.py"]}</answer>' }],
    });
    expect((finish.body.results as { done: boolean }[])[0]!.done).toBe(true);
    const closed = await post('/episodes/close', { episodeIds: [episode!.episodeId] });
    expect(closed.status).toBe(200);
    expect((closed.body.results as { reward: number }[])[0]!.reward).toBe(1);
  });

  it("is driven end to end by the trainer's own Python client (trainer/env_client.py), which checks every field", async () => {
    const script = `
import json, sys
from trainer.env_client import EnvClient
client = EnvClient(sys.argv[1], timeout_s=30)
episodes = client.open(["acme__widgets-1", "acme__widgets-2"], 2, 1234)
texts = {}
for e in episodes:
    if e.instance_id == "acme__widgets-1":
        texts[e.episode_id] = ${JSON.stringify(qwen3ToolCalls('look', [{ name: 'grep', arguments: { pattern: 'def mesh' } }]))}
    else:
        texts[e.episode_id] = "no idea"
first = client.step([{"episodeId": k, "assistantText": v, "truncated": False} for k, v in texts.items()])
running = [k for k, r in first.items() if not r.done]
second = client.step([{"episodeId": k, "assistantText": '<answer>{"files": ["widgets/gears.py"]}</answer>', "truncated": False} for k in running])
outcomes = client.close([e.episode_id for e in episodes])
print(json.dumps({
  "instances": [e.instance_id for e in episodes],
  "tools": [t["function"]["name"] for t in episodes[0].tools],
  "observation": [o["role"] for o in first[running[0]].observations],
  "second_done": [r.done for r in second.values()],
  "outcomes": [[o.reward, o.tool_calls_per_turn, o.advantage_scale, o.turns, o.answered, o.hit_turn_limit, sorted(o.components)] for o in outcomes.values()],
}))
`;
    const python = path.join(repoRoot, '.venv/bin/python');
    const { stdout } = await execFileAsync(python, ['-c', script, server.url], { cwd: repoRoot, timeout: 60_000 });
    const seen = JSON.parse(stdout) as Record<string, unknown>;
    expect(seen.instances).toEqual(['acme__widgets-1', 'acme__widgets-1', 'acme__widgets-2', 'acme__widgets-2']);
    expect(seen.tools).toEqual(['grep', 'glob', 'read']);
    expect(seen.observation).toEqual(['tool']);
    expect(seen.second_done).toEqual([true, true]);
    // Answered G(x) = {gears.py, __init__.py} with gears.py only: P 1, R ½ -> F0.5 = 5/6; c̄ = 1/2 -> s = sqrt(1/8).
    const components = ['file_fbeta', 'file_precision', 'file_recall', 'tool_mask'];
    const answered = [5 / 6, 0.5, Math.sqrt(1 / 8), 2, true, false, components];
    const silent = [0, 0, 0, 1, false, false, components];
    const outcomes = seen.outcomes as unknown[][];
    const rounded = (rows: unknown[][]) => rows.map((o) => o.map((v) => (typeof v === 'number' ? Number(v.toFixed(12)) : v)));
    expect(rounded(outcomes)).toEqual(rounded([answered, answered, silent, silent]));
  });
});

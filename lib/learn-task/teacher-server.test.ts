import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTeacherServer, type TeacherServer } from './teacher-server';

let teacher: TeacherServer;
beforeAll(async () => {
  teacher = await startTeacherServer();
});
afterAll(async () => {
  await teacher.close();
});

describe('the grep teacher endpoint', () => {
  const client = () => new OpenAI({ baseURL: teacher.baseUrl, apiKey: 'unused', maxRetries: 0 });

  it('greps for the function the issue names, then answers the file grep found', async () => {
    const issue = 'The cache component: `refresh_bucket` returns a stale value after the second call.';
    const first = await client().chat.completions.create({ model: teacher.model, messages: [{ role: 'user', content: issue }] });
    const call = first.choices[0]!.message.tool_calls![0]!;
    expect(first.choices[0]!.finish_reason).toBe('tool_calls');
    expect(call.type === 'function' && call.function.name).toBe('grep');
    expect(call.type === 'function' && JSON.parse(call.function.arguments)).toEqual({ pattern: 'def refresh_bucket\\b' });
    const second = await client().chat.completions.create({
      model: teacher.model,
      messages: [
        { role: 'user', content: issue },
        { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: call.id, content: 'tests/test_cache.py:3:x\nsrc/cache.py:12:def refresh_bucket(x):' },
      ],
    });
    // The first `path:line:` match, whatever its folder: the teacher copies grep, it does not judge.
    expect(second.choices[0]!.message.content).toBe('<answer>{"files":["tests/test_cache.py"]}</answer>');
    expect(teacher.requests()).toBe(2);
  });

  it('answers nothing when the issue names no function or grep found nothing', async () => {
    const none = await client().chat.completions.create({ model: teacher.model, messages: [{ role: 'user', content: 'it is broken' }] });
    expect(none.choices[0]!.message.content).toBe('<answer>{"files":[]}</answer>');
  });

  it('refuses a body that is not JSON and an unknown route, in OpenAI error shape', async () => {
    const bad = await fetch(`${teacher.baseUrl}/chat/completions`, { method: 'POST', body: '{not json' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/not JSON/);
    const missing = await fetch(`${teacher.baseUrl}/embeddings`, { method: 'POST', body: '{}' });
    expect(missing.status).toBe(404);
    const models = (await (await fetch(`${teacher.baseUrl}/models`)).json()) as { data: Array<{ id: string }> };
    expect(models.data.map((m) => m.id)).toEqual(['grep-teacher']);
  });
});

import { describe, expect, it } from 'vitest';
import { LlmRetriesExhaustedError } from './errors';
import { abortableSleep, backoffDelayMs, callWithRetries, parseRetryAfterMs, resolveRetryPolicy } from './retry';

describe('parseRetryAfterMs', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  const cases: Array<[string, Record<string, string>, number | undefined]> = [
    ['absent', {}, undefined],
    ['integer seconds', { 'retry-after': '3' }, 3_000],
    ['fractional seconds', { 'retry-after': '0.25' }, 250],
    ['retry-after-ms wins over retry-after', { 'retry-after-ms': '40', 'retry-after': '9' }, 40],
    ['HTTP date in the future', { 'retry-after': 'Thu, 01 Jan 2026 00:00:05 GMT' }, 5_000],
    ['HTTP date in the past gives 0', { 'retry-after': 'Wed, 31 Dec 2025 23:59:00 GMT' }, 0],
    ['unreadable', { 'retry-after': 'soon' }, undefined],
    ['negative seconds are ignored', { 'retry-after': '-1' }, undefined],
    ['empty', { 'retry-after': ' ' }, undefined],
  ];
  it.each(cases)('%s', (_name, headers, expected) => {
    expect(parseRetryAfterMs(new Headers(headers), now)).toBe(expected);
  });
});

describe('backoffDelayMs', () => {
  const policy = { baseDelayMs: 100, maxDelayMs: 1_000 };
  it('doubles per retry between half and all of the step, capped at maxDelayMs', () => {
    expect(backoffDelayMs(1, policy, () => 0)).toBe(50);
    expect(backoffDelayMs(1, policy, () => 1)).toBe(100);
    expect(backoffDelayMs(3, policy, () => 0)).toBe(200);
    expect(backoffDelayMs(3, policy, () => 1)).toBe(400);
    expect(backoffDelayMs(10, policy, () => 0.5)).toBe(750);
  });
});

describe('resolveRetryPolicy', () => {
  it('keeps the defaults (60 s per attempt, CodeGrep App. A.2) and ignores undefined overrides', () => {
    const policy = resolveRetryPolicy({ maxAttempts: undefined, baseDelayMs: 5 });
    expect(policy.timeoutMs).toBe(60_000);
    expect(policy.maxAttempts).toBe(6);
    expect(policy.baseDelayMs).toBe(5);
  });
  it('rejects nonsense with the field named', () => {
    expect(() => resolveRetryPolicy({ maxAttempts: 0 })).toThrow(/maxAttempts must be an integer ≥ 1, got 0/);
    expect(() => resolveRetryPolicy({ timeoutMs: 0 })).toThrow(/timeoutMs must be a positive number/);
    expect(() => resolveRetryPolicy({ baseDelayMs: -1 })).toThrow(/baseDelayMs/);
  });
});

describe('callWithRetries', () => {
  const base = { endpoint: 'http://x/v1', model: 'm', policy: { baseDelayMs: 1, maxDelayMs: 2 } };

  it('fails with LlmRetriesExhaustedError after maxAttempts per-attempt timeouts, aborting each attempt', async () => {
    const aborted: number[] = [];
    const error = await callWithRetries(
      (signal, attempt) =>
        new Promise((_resolve, reject) => {
          signal.addEventListener('abort', () => {
            aborted.push(attempt);
            reject(signal.reason);
          });
        }),
      { ...base, policy: { ...base.policy, maxAttempts: 3, timeoutMs: 30 } },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmRetriesExhaustedError);
    expect((error as LlmRetriesExhaustedError).attempts).toBe(3);
    expect((error as Error).message).toBe('LLM endpoint http://x/v1 failed 3 attempt(s); last failure: no reply within 30 ms');
    expect(aborted).toEqual([1, 2, 3]);
  });

  it('rethrows an unknown error at once (a bug is not retried)', async () => {
    let calls = 0;
    await expect(
      callWithRetries(async () => {
        calls += 1;
        throw new RangeError('bug');
      }, base),
    ).rejects.toThrow(RangeError);
    expect(calls).toBe(1);
  });

  it("stops waiting and rejects with the caller's reason when the caller aborts", async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('stop requested')), 20);
    const started = Date.now();
    await expect(
      callWithRetries((signal) => new Promise((_r, reject) => signal.addEventListener('abort', () => reject(signal.reason))), {
        ...base,
        signal: controller.signal,
      }),
    ).rejects.toThrow('stop requested');
    expect(Date.now() - started).toBeLessThan(1_000);
    await expect(abortableSleep(10_000, controller.signal)).rejects.toThrow('stop requested');
  });
});

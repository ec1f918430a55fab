import { describe, expect, it } from 'vitest';
import { heldKeyCount, withKeyedLock } from './keyed-lock';

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('withKeyedLock', () => {
  it('runs holders of one key one at a time, in call order, and other keys alongside', async () => {
    const events: string[] = [];
    let inside = 0;
    let most = 0;
    const job = (key: string, name: string) =>
      withKeyedLock(key, async () => {
        inside += key === 'a' ? 1 : 0;
        most = Math.max(most, inside);
        events.push(`start ${name}`);
        await tick();
        await tick();
        events.push(`end ${name}`);
        inside -= key === 'a' ? 1 : 0;
        return name;
      });
    const results = await Promise.all([job('a', 'a1'), job('a', 'a2'), job('b', 'b1'), job('a', 'a3')]);
    expect(results).toEqual(['a1', 'a2', 'b1', 'a3']);
    expect(most).toBe(1);
    const aEvents = events.filter((e) => / a\d$/.test(e));
    expect(aEvents).toEqual(['start a1', 'end a1', 'start a2', 'end a2', 'start a3', 'end a3']);
    // b1 did not wait for the a's.
    expect(events.indexOf('start b1')).toBeLessThan(events.indexOf('end a1'));
    expect(heldKeyCount()).toBe(0);
  });

  it('releases the key when a holder throws', async () => {
    await expect(withKeyedLock('k', () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await withKeyedLock('k', async () => 'next')).toBe('next');
    expect(heldKeyCount()).toBe(0);
  });
});

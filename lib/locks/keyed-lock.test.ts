import { describe, expect, it } from 'vitest';
import { createKeyedLock } from './keyed-lock';

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('createKeyedLock', () => {
  it('runs holders of one key one at a time, in call order, and other keys alongside', async () => {
    const lock = createKeyedLock();
    const events: string[] = [];
    let inside = 0;
    let most = 0;
    const job = (key: string, name: string) =>
      lock.run(key, async () => {
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
    expect(lock.heldKeys).toBe(0);
  });

  it('releases the key when a holder throws', async () => {
    const lock = createKeyedLock();
    await expect(lock.run('k', () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await lock.run('k', async () => 'next')).toBe('next');
    expect(lock.heldKeys).toBe(0);
  });

  it('keeps two locks apart: the same key in another lock does not wait', async () => {
    const first = createKeyedLock();
    const second = createKeyedLock();
    const events: string[] = [];
    let letGo!: () => void;
    const held = first.run('same', () => new Promise<void>((resolve) => (letGo = resolve)).then(() => void events.push('first done')));
    await second.run('same', async () => void events.push('second ran'));
    expect(first.heldKeys).toBe(1);
    letGo();
    await held;
    expect(events).toEqual(['second ran', 'first done']);
    expect(first.heldKeys + second.heldKeys).toBe(0);
  });
});

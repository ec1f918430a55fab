import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { followAbort } from './abort';

describe('followAbort', () => {
  it('keeps one listener on the parent however many children follow it, and aborts the linked ones with its reason', () => {
    const parent = new AbortController();
    const linked = Array.from({ length: 50 }, () => new AbortController());
    for (const child of linked) followAbort(parent.signal, child);
    const unlinked = new AbortController();
    followAbort(parent.signal, unlinked)();
    expect(getEventListeners(parent.signal, 'abort')).toHaveLength(1);
    const reason = new Error('run cancelled');
    parent.abort(reason);
    expect(linked.every((c) => c.signal.aborted && c.signal.reason === reason)).toBe(true);
    expect(unlinked.signal.aborted).toBe(false);
  });

  it('aborts at once when the parent already is, and does nothing without a parent', () => {
    const parent = new AbortController();
    parent.abort('gone');
    const child = new AbortController();
    followAbort(parent.signal, child);
    expect(child.signal.reason).toBe('gone');
    const free = new AbortController();
    followAbort(undefined, free)();
    expect(free.signal.aborted).toBe(false);
  });
});

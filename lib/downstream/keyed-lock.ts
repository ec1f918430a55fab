/**
 * An in-process async lock per key: `withKeyedLock(key, fn)` runs `fn` after every earlier holder of the
 * same key has finished, in call order. The editor keys it by a file's absolute path, so concurrent edits of
 * one file apply one after another, each on the text the previous one left, and none is silently lost.
 */
const tails = new Map<string, Promise<void>>();

export async function withKeyedLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const previous = tails.get(key) ?? Promise.resolve();
  let release!: () => void;
  const mine = new Promise<void>((resolve) => (release = resolve));
  const tail = previous.then(() => mine);
  tails.set(key, tail);
  await previous;
  try {
    return await fn();
  } finally {
    release();
    // The last holder leaves no entry behind, so the map holds only keys with a waiter or a holder.
    if (tails.get(key) === tail) tails.delete(key);
  }
}

/** Keys currently held or waited on (for tests: a finished run leaves none). */
export function heldKeyCount(): number {
  return tails.size;
}

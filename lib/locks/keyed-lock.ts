/**
 * An in-process async lock per key: `lock.run(key, fn)` runs `fn` after every earlier holder of the same key
 * has finished, in call order; other keys run alongside. Each user makes its own (`createKeyedLock()`), so
 * two users' keys never wait on each other:
 *  - the downstream editor keys it by a file's absolute path, so concurrent edits of one file apply one after
 *    another, each on the text the previous one left, and none is silently lost (lib/downstream/agents/editor.ts);
 *  - the repository lock keys it by the lock file, the in-process half of lib/worktrees/repo-lock.ts.
 */
export interface KeyedLock {
  run<T>(key: string, fn: () => Promise<T>): Promise<T>;
  /** Keys currently held or waited on (for tests: a finished run leaves none). */
  readonly heldKeys: number;
}

export function createKeyedLock(): KeyedLock {
  const tails = new Map<string, Promise<void>>();
  return {
    async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
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
    },
    get heldKeys() {
      return tails.size;
    },
  };
}

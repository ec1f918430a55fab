/**
 * Child AbortControllers that follow a long-lived parent signal (a run's cancellation) without leaking.
 *
 * Why not AbortSignal.any([parent, child]): on Node 20 every call registers a dependent on the parent that is
 * only dropped when the parent goes away, so a run making tens of thousands of calls under one cancellation
 * signal grows its heap and slows each further call (measured: +2.6 kB and rising per call). And a listener per
 * call on the parent trips Node's "possible EventTarget memory leak" warning beyond 10 concurrent calls.
 * Here each parent carries exactly one listener, and a child leaves its parent's set when unlinked.
 */
const followers = new WeakMap<AbortSignal, Set<AbortController>>();

/** Aborts `child` with the parent's reason when `parent` aborts; the returned function unlinks it. */
export function followAbort(parent: AbortSignal | undefined, child: AbortController): () => void {
  if (!parent) return () => undefined;
  if (parent.aborted) {
    child.abort(parent.reason);
    return () => undefined;
  }
  let children = followers.get(parent);
  if (!children) {
    const created = new Set<AbortController>();
    followers.set(parent, created);
    parent.addEventListener(
      'abort',
      () => {
        for (const follower of created) follower.abort(parent.reason);
        created.clear();
      },
      { once: true },
    );
    children = created;
  }
  const set = children;
  set.add(child);
  return () => {
    set.delete(child);
  };
}

/**
 * Ranking of a score array, highest first, ties broken by insertion order (lower document id first):
 * CodeGrep App. E, "Retrieval". The equivalent Python is `sorted(range(N), key=lambda i: (-s[i], i))`.
 */

function before(scores: Float64Array, a: number, b: number): boolean {
  const sa = scores[a]!;
  const sb = scores[b]!;
  return sa > sb || (sa === sb && a < b);
}

/** The ids of the k best documents, best first (fewer when there are fewer documents). O(N·k). */
export function topKIndices(scores: Float64Array, k: number): number[] {
  if (!Number.isInteger(k) || k < 1) throw new RangeError(`k must be a positive integer, got ${k}`);
  const best: number[] = [];
  for (let d = 0; d < scores.length; d++) {
    if (best.length === k && !before(scores, d, best[k - 1]!)) continue;
    let position = best.length < k ? best.length : k - 1;
    if (best.length < k) best.push(d);
    while (position > 0 && before(scores, d, best[position - 1]!)) {
      best[position] = best[position - 1]!;
      position--;
    }
    best[position] = d;
  }
  return best;
}

/** Every document id, best first. */
export function rankAll(scores: Float64Array): Int32Array {
  const order = new Int32Array(scores.length);
  for (let d = 0; d < order.length; d++) order[d] = d;
  return order.sort((a, b) => scores[b]! - scores[a]! || a - b);
}
